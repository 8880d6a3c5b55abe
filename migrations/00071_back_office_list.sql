-- The back office's list of all orders and top-ups (issue 39, item 4;
-- postgres.ListCases): newest first, a page at a time by keyset
-- (created_at, ref), filtered by status or model, searched by the
-- reference's start, a fragment of the customer's email or name, and a
-- transaction id's start.
-- - (created_at, ref) and (status|model, created_at, ref): a page is an
--   index range read backwards from its cursor, whatever the page's depth;
-- - text_pattern_ops: LIKE 'prefix%' on references and txids, whatever
--   the database's collation;
-- - pg_trgm (a trusted extension since PostgreSQL 13: the database's
--   owner, who migrates, may create it) serves LIKE '%fragment%' on the
--   customers' emails and names.
-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX orders_list_idx ON orders (created_at, ref);
CREATE INDEX orders_status_list_idx ON orders (status, created_at, ref);
CREATE INDEX orders_model_list_idx ON orders (gpu_model, created_at, ref);
CREATE INDEX orders_ref_prefix_idx ON orders (ref text_pattern_ops);
CREATE INDEX topups_list_idx ON topups (created_at, ref);
CREATE INDEX topups_status_list_idx ON topups (status, created_at, ref);
CREATE INDEX topups_ref_prefix_idx ON topups (ref text_pattern_ops);
CREATE INDEX accounts_email_trgm_idx ON accounts USING gin (lower(email) gin_trgm_ops);
CREATE INDEX accounts_name_trgm_idx ON accounts USING gin (lower(first_name || ' ' || last_name) gin_trgm_ops);
CREATE INDEX chain_payments_txid_prefix_idx ON chain_payments (txid text_pattern_ops);
CREATE INDEX payment_exceptions_txid_prefix_idx ON payment_exceptions (txid text_pattern_ops) WHERE txid <> '';

-- +goose Down
DROP INDEX payment_exceptions_txid_prefix_idx;
DROP INDEX chain_payments_txid_prefix_idx;
DROP INDEX accounts_name_trgm_idx;
DROP INDEX accounts_email_trgm_idx;
DROP INDEX topups_ref_prefix_idx;
DROP INDEX topups_status_list_idx;
DROP INDEX topups_list_idx;
DROP INDEX orders_ref_prefix_idx;
DROP INDEX orders_model_list_idx;
DROP INDEX orders_status_list_idx;
DROP INDEX orders_list_idx;
-- pg_trgm stays: dropping it could break what others built on it since.
