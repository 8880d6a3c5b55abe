-- Chain watchers (issue 11): payments the watcher cannot count are kept for
-- support, dust is summarised per request, a reorganisation deeper than the
-- confirmation policy is told apart, mempool sightings are marked.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE chain_payments
    -- Below the network's dust threshold: never signalled one by one, summed
    -- in chain_dust_summaries.
    ADD COLUMN dust BOOLEAN NOT NULL DEFAULT false,
    -- Not countable, for support: another asset than the request's, or the
    -- request was no longer watched at the block's time. Never signalled.
    ADD COLUMN to_support TEXT CHECK (to_support IN ('other_asset', 'not_watched')),
    -- Reverted by a reorganisation after it had been confirmed.
    ADD COLUMN after_confirmation BOOLEAN NOT NULL DEFAULT false,
    -- Seen in the node's mempool, not (yet) in a block.
    ADD COLUMN mempool BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN block_time TIMESTAMPTZ;

DROP INDEX chain_payments_unsignaled_idx;
CREATE INDEX chain_payments_unsignaled_idx ON chain_payments (network, seen_at, txid, output_index)
    WHERE signaled_state IS DISTINCT FROM state AND NOT dust AND to_support IS NULL;
CREATE INDEX chain_payments_to_support_idx ON chain_payments (seen_at) WHERE to_support IS NOT NULL;

-- Running totals of the confirmed dust per request; version grows with each
-- change, signaled_version is the one the workflow acknowledged.
CREATE TABLE chain_dust_summaries (
    intent_id         TEXT PRIMARY KEY REFERENCES payment_intents(id),
    network           TEXT NOT NULL,
    outputs           BIGINT NOT NULL CHECK (outputs >= 0),
    amount_base       NUMERIC(78, 0) NOT NULL CHECK (amount_base >= 0),
    version           BIGINT NOT NULL CHECK (version > 0),
    signaled_version  BIGINT
);
CREATE INDEX chain_dust_summaries_unsignaled_idx ON chain_dust_summaries (network)
    WHERE signaled_version IS DISTINCT FROM version;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE chain_dust_summaries;
DROP INDEX chain_payments_to_support_idx;
DROP INDEX chain_payments_unsignaled_idx;
ALTER TABLE chain_payments DROP COLUMN dust, DROP COLUMN to_support, DROP COLUMN after_confirmation,
    DROP COLUMN mempool, DROP COLUMN block_time;
CREATE INDEX chain_payments_unsignaled_idx ON chain_payments (network) WHERE signaled_state IS DISTINCT FROM state;
-- +goose StatementEnd
