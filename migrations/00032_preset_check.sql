-- What the preset's own check found on the host (pytorch and inference
-- presets: the PyTorch backend check), shown on the order with the access.
-- +goose Up
ALTER TABLE host_reservations ADD COLUMN preset_check TEXT;

-- +goose Down
ALTER TABLE host_reservations DROP COLUMN preset_check;
