-- AMD GPUs are verified with amd-smi (provision/sshhost): the name its
-- MARKET_NAME shows for each catalog AMD model.
-- +goose Up
UPDATE gpu_models SET smi_name_pattern = '^AMD Instinct MI210$' WHERE model = 'mi210';

-- +goose Down
UPDATE gpu_models SET smi_name_pattern = NULL WHERE model = 'mi210';
