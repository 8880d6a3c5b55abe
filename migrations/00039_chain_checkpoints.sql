-- How far a watcher that follows requests by reference (Solana) has read
-- every watched request: the finalized slot and its block time. Requests
-- are loaded and evicted by this chain time, never by the wall clock, so a
-- watcher that was down for longer than a watch window still reads every
-- request that was open at its last checkpoint.
-- +goose Up
CREATE TABLE chain_checkpoints (
    network    TEXT PRIMARY KEY,
    height     BIGINT NOT NULL,
    block_time TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE chain_checkpoints;
