-- Payouts in the back office's list (issue 39, item 4; postgres.ListCases):
-- newest first by keyset on (created_at, ref), by status, and by the
-- start of their transaction id, as orders and top-ups (migration 00071).
-- +goose Up
CREATE INDEX payouts_list_idx ON payouts (created_at, ref);
CREATE INDEX payouts_status_list_idx ON payouts (status, created_at, ref);
CREATE INDEX payouts_txid_prefix_idx ON payouts (txid text_pattern_ops) WHERE txid IS NOT NULL;

-- +goose Down
DROP INDEX payouts_txid_prefix_idx;
DROP INDEX payouts_status_list_idx;
DROP INDEX payouts_list_idx;
