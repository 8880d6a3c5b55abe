-- Crypto payments: payment requests (intents), watch-only derivation
-- indexes, what the chain watchers saw, their cursors and leases.
-- +goose Up
-- +goose StatementBegin

-- Next unused derivation index per network. Indexes are never reused; the
-- used ones are listed in payment_intents for operators (wallet gap limits).
CREATE TABLE hd_indexes (
    network     TEXT PRIMARY KEY CHECK (network IN ('bitcoin', 'litecoin', 'ethereum', 'tron')),
    next_index  BIGINT NOT NULL DEFAULT 0 CHECK (next_index BETWEEN 0 AND 2147483647)
);
INSERT INTO hd_indexes (network) VALUES ('bitcoin'), ('litecoin'), ('ethereum'), ('tron');

CREATE TABLE payment_intents (
    seq               BIGSERIAL NOT NULL UNIQUE,  -- watchers load new intents incrementally
    id                TEXT PRIMARY KEY,
    target_kind       TEXT NOT NULL CHECK (target_kind IN ('order', 'topup')),
    target_ref        TEXT NOT NULL,
    account_id        BIGINT NOT NULL REFERENCES accounts(id),
    asset             TEXT NOT NULL,
    network           TEXT NOT NULL,
    CHECK ((asset = 'BTC' AND network = 'bitcoin') OR (asset = 'LTC' AND network = 'litecoin')
        OR (asset IN ('ETH', 'USDT', 'USDC') AND network = 'ethereum')
        OR (asset IN ('TRX', 'USDT') AND network = 'tron') OR (asset = 'SOL' AND network = 'solana')),
    decimals          INT NOT NULL CHECK (decimals BETWEEN 0 AND 18),
    amount_base       NUMERIC(78, 0) NOT NULL CHECK (amount_base > 0),
    usd_cents         BIGINT NOT NULL CHECK (usd_cents > 0),
    rate              NUMERIC NOT NULL CHECK (rate > 0),      -- USD per whole unit
    rate_source       TEXT NOT NULL,
    rate_at           TIMESTAMPTZ NOT NULL,
    address           TEXT NOT NULL,
    derivation_index  BIGINT,                                  -- NULL on Solana
    reference_key     TEXT,                                    -- Solana Pay reference
    token_contract    TEXT,                                    -- ERC-20 / TRC-20 contract
    payment_uri       TEXT NOT NULL,
    deadline          TIMESTAMPTZ NOT NULL,
    watch_until       TIMESTAMPTZ NOT NULL CHECK (watch_until >= deadline),
    -- open: the target's current request; superseded: replaced by a newer one
    -- (still watched until watch_until: what arrives is late).
    status            TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'superseded')),
    -- The workflow's key for this request: a retried activity finds it.
    request_key       TEXT NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK ((network = 'solana') = (reference_key IS NOT NULL)),
    CHECK ((network = 'solana') = (derivation_index IS NULL))
);
-- Never an address or an amount another intent had.
CREATE UNIQUE INDEX payment_intents_address_key ON payment_intents (network, lower(address)) WHERE network <> 'solana';
CREATE UNIQUE INDEX payment_intents_reference_key ON payment_intents (reference_key) WHERE reference_key IS NOT NULL;
CREATE UNIQUE INDEX payment_intents_amount_key ON payment_intents (network, asset, amount_base);
CREATE UNIQUE INDEX payment_intents_index_key ON payment_intents (network, derivation_index) WHERE derivation_index IS NOT NULL;
-- One open request per order or top-up.
CREATE UNIQUE INDEX payment_intents_one_open ON payment_intents (target_ref) WHERE status = 'open';
CREATE UNIQUE INDEX payment_intents_request_key ON payment_intents (target_ref, request_key);
CREATE INDEX payment_intents_watch_idx ON payment_intents (network, watch_until);

CREATE FUNCTION payment_intents_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('payment_intents', NEW.network);
    RETURN NEW;
END $$;
CREATE TRIGGER payment_intents_notify AFTER INSERT ON payment_intents
    FOR EACH ROW EXECUTE FUNCTION payment_intents_notify();

-- "J'ai payé": the customer's claim. It confirms nothing.
CREATE TABLE payment_claims (
    id          BIGSERIAL PRIMARY KEY,
    intent_id   TEXT NOT NULL REFERENCES payment_intents(id),
    account_id  BIGINT NOT NULL REFERENCES accounts(id),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What the watchers saw. Keyed by (network, txid, output or log index): a
-- payment seen twice is stored once.
CREATE TABLE chain_payments (
    network         TEXT NOT NULL,
    txid            TEXT NOT NULL,
    output_index    BIGINT NOT NULL CHECK (output_index >= 0),
    asset           TEXT NOT NULL,
    intent_id       TEXT NOT NULL REFERENCES payment_intents(id),
    address         TEXT NOT NULL,
    amount_base     NUMERIC(78, 0) NOT NULL CHECK (amount_base > 0),
    amount_cents    BIGINT NOT NULL CHECK (amount_cents >= 0),
    late            BOOLEAN NOT NULL,
    block_height    BIGINT,
    block_hash      TEXT,
    state           TEXT NOT NULL CHECK (state IN ('seen', 'confirmed', 'reverted')),
    seen_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    confirmed_at    TIMESTAMPTZ,
    reverted_at     TIMESTAMPTZ,
    -- The last state the workflow acknowledged (signal delivered). The
    -- reconciler re-sends wherever it differs from state.
    signaled_state  TEXT,
    signaled_at     TIMESTAMPTZ,
    PRIMARY KEY (network, txid, output_index)
);
CREATE INDEX chain_payments_unsignaled_idx ON chain_payments (network) WHERE signaled_state IS DISTINCT FROM state;
CREATE INDEX chain_payments_unconfirmed_idx ON chain_payments (network, block_height) WHERE state = 'seen';
CREATE INDEX chain_payments_intent_idx ON chain_payments (intent_id);

-- Recent block hashes per network, to detect reorganisations.
CREATE TABLE chain_blocks (
    network  TEXT NOT NULL,
    height   BIGINT NOT NULL,
    hash     TEXT NOT NULL,
    PRIMARY KEY (network, height)
);

-- One active watcher per network.
CREATE TABLE watcher_leases (
    network     TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);

-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE IF EXISTS watcher_leases, chain_blocks, chain_payments, payment_claims, payment_intents, hd_indexes CASCADE;
DROP FUNCTION IF EXISTS payment_intents_notify;
-- +goose StatementEnd
