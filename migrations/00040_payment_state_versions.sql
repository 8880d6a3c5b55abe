-- Every change of a payment's state (seen, confirmed, reverted, seen
-- again) gets a higher state_version, sent with the signal: a workflow that
-- reads a batch of signals by kind ignores a state older than one it
-- applied, and a delivery is acknowledged for its version, so a state that
-- changed while its predecessor was in flight is always sent again.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE chain_payments
    ADD COLUMN state_version BIGINT NOT NULL DEFAULT 1 CHECK (state_version >= 1),
    ADD COLUMN signaled_version BIGINT;
UPDATE chain_payments SET signaled_version = state_version WHERE signaled_state = state;
DROP INDEX chain_payments_unsignaled_idx;
CREATE INDEX chain_payments_unsignaled_idx ON chain_payments (network, seen_at, txid, output_index)
    WHERE signaled_version IS DISTINCT FROM state_version AND NOT dust AND to_support IS NULL;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP INDEX chain_payments_unsignaled_idx;
CREATE INDEX chain_payments_unsignaled_idx ON chain_payments (network, seen_at, txid, output_index)
    WHERE signaled_state IS DISTINCT FROM state AND NOT dust AND to_support IS NULL;
ALTER TABLE chain_payments DROP COLUMN state_version, DROP COLUMN signaled_version;
-- +goose StatementEnd
