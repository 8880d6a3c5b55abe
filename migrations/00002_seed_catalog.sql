-- Catalog seed. RTX A5000's 3- and 7-day lot prices come from the published
-- guide (23.57 USD and 55 USD); every other model and price is operator data
-- that can be changed with plain SQL or a later migration.
-- +goose Up
INSERT INTO gpu_models (model, display_name, vendor, memory_gb, gpus_per_lot, sort_order) VALUES
    ('rtx-a5000', 'NVIDIA RTX A5000', 'nvidia', 24, 1, 10),
    ('rtx-4090',  'NVIDIA GeForce RTX 4090', 'nvidia', 24, 1, 20),
    ('rtx-a6000', 'NVIDIA RTX A6000', 'nvidia', 48, 1, 30),
    ('l40s',      'NVIDIA L40S', 'nvidia', 48, 1, 40),
    ('a100-80g',  'NVIDIA A100 80GB', 'nvidia', 80, 1, 50),
    ('h100-80g',  'NVIDIA H100 80GB', 'nvidia', 80, 1, 60),
    ('mi210',     'AMD Instinct MI210', 'amd', 64, 1, 70),
    ('b200',      'NVIDIA B200', 'nvidia', 192, 2, 80);

INSERT INTO gpu_prices (model, duration_days, lot_cents) VALUES
    ('rtx-a5000', 3, 2357), ('rtx-a5000', 7, 5500), ('rtx-a5000', 30, 21900),
    ('rtx-4090', 3, 2990), ('rtx-4090', 7, 6790), ('rtx-4090', 30, 26900),
    ('rtx-a6000', 3, 4190), ('rtx-a6000', 7, 9490), ('rtx-a6000', 30, 37900),
    ('l40s', 3, 6290), ('l40s', 7, 13990), ('l40s', 30, 55900),
    ('a100-80g', 3, 9990), ('a100-80g', 7, 22490), ('a100-80g', 30, 89900),
    ('h100-80g', 3, 17990), ('h100-80g', 7, 39990), ('h100-80g', 30, 159900),
    ('mi210', 3, 7490), ('mi210', 7, 16990), ('mi210', 30, 67900),
    ('b200', 3, 69900), ('b200', 7, 155900), ('b200', 30, 619900);

-- Local provisioning driver's capacity (operator data too).
INSERT INTO gpu_inventory (gpu_model, total_gpus) VALUES
    ('rtx-a5000', 40), ('rtx-4090', 40), ('rtx-a6000', 20), ('l40s', 20),
    ('a100-80g', 16), ('h100-80g', 16), ('mi210', 8), ('b200', 16);

-- +goose Down
DELETE FROM gpu_inventory;
DELETE FROM gpu_prices;
DELETE FROM gpu_models;
