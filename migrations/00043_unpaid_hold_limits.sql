-- Holds that cost the holder (issue 19, rule 3): an account, and a client
-- network, hold at most a few hosts for unpaid payment requests at once
-- (postgres.Capacity.HoldForRequest). The network that last asked for a
-- payment request on an order is kept as a SHA-256 hash (no address is
-- stored), so the holds of one network can be counted whoever asked.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE orders ADD COLUMN hold_network BYTEA;
CREATE INDEX orders_unpaid_hold_network_idx ON orders (hold_network) WHERE status = 'awaiting_payment';
CREATE INDEX orders_unpaid_account_idx ON orders (account_id, created_at) WHERE status = 'awaiting_payment';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP INDEX IF EXISTS orders_unpaid_account_idx;
DROP INDEX IF EXISTS orders_unpaid_hold_network_idx;
ALTER TABLE orders DROP COLUMN IF EXISTS hold_network;
-- +goose StatementEnd
