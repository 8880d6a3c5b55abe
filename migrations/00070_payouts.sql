-- Payouts (issue 39, item 1): a customer's available balance sent back to
-- a wallet. The amount is held from the balance at once ('payout'
-- transactions, customer -> payouts_held); a cancelled payout releases it
-- (payouts_held -> customer); a payout the chain watchers saw confirmed is
-- debited for good (payouts_held -> payouts_sent), once per payout.
--
-- The server holds no spending key: approved payouts are exported in
-- batches (a PSBT for BTC and LTC, a transfer list elsewhere) that an
-- operator signs off the server. Once signed, each payout is watched like a
-- payment request: a payment_intents row of target_kind 'payout' at the
-- customer's address for the exact amount, whose target is the batch.
-- +goose Up
-- +goose StatementBegin
CREATE TABLE payout_batches (
    ref         TEXT PRIMARY KEY,
    network     TEXT NOT NULL,
    asset       TEXT NOT NULL,
    -- open: exported, waiting for the signed transaction; signed: the
    -- transaction is known (BTC/LTC) or the operator says it was sent;
    -- done: every payout confirmed; voided: a payout left it before it was
    -- signed (its others are approved again and go in a new batch).
    status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'signed', 'done', 'voided')),
    created_by  TEXT NOT NULL,
    psbt        TEXT,                 -- base64, BTC and LTC
    plan        JSONB,                -- what the PSBT spends and pays (payout.Plan), to check the signed one
    fee_base    NUMERIC(78, 0),       -- the PSBT's network fee, base units
    -- The change's index on the account's internal chain (m/.../1/i),
    -- never used twice on a network.
    change_index BIGINT CHECK (change_index >= 0),
    txid        TEXT,                 -- the signed transaction (BTC, LTC)
    raw_tx      TEXT,
    signed_by   TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    signed_at   TIMESTAMPTZ
);
CREATE UNIQUE INDEX payout_batches_one_open ON payout_batches (network, asset) WHERE status = 'open';
CREATE UNIQUE INDEX payout_batches_change_index ON payout_batches (network, change_index);

CREATE TABLE payouts (
    ref              TEXT PRIMARY KEY,
    account_id       BIGINT NOT NULL REFERENCES accounts(id),
    asset            TEXT NOT NULL,
    network          TEXT NOT NULL,
    address          TEXT NOT NULL CHECK (length(address) BETWEEN 20 AND 128),
    amount_cents     BIGINT NOT NULL CHECK (amount_cents > 0),   -- held from the balance
    fee_cents        BIGINT NOT NULL CHECK (fee_cents >= 0),     -- the network fee, within amount_cents
    decimals         INT NOT NULL CHECK (decimals BETWEEN 0 AND 18),
    amount_base      NUMERIC(78, 0) NOT NULL CHECK (amount_base > 0), -- what the customer receives
    rate             NUMERIC NOT NULL CHECK (rate > 0),          -- USD per whole unit, locked at the quote
    rate_at          TIMESTAMPTZ NOT NULL,
    status           TEXT NOT NULL CHECK (status IN
        ('requested', 'approved', 'batched', 'signed', 'seen', 'done', 'cancelled', 'declined')),
    -- Approvals: one agent, and above the four-eyes threshold a second,
    -- different one (a senior).
    needs_two        BOOLEAN NOT NULL,
    approved_by      TEXT,
    second_by        TEXT CHECK (second_by IS NULL OR second_by <> approved_by),
    declined_by      TEXT,
    reason           TEXT,
    batch_ref        TEXT REFERENCES payout_batches(ref),
    txid             TEXT,
    request_key      TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK (fee_cents < amount_cents),
    UNIQUE (account_id, request_key)
);
CREATE INDEX payouts_account_idx ON payouts (account_id, created_at DESC);
CREATE INDEX payouts_open_idx ON payouts (network, asset, status) WHERE status IN ('requested', 'approved', 'batched');
CREATE INDEX payouts_batch_idx ON payouts (batch_ref) WHERE batch_ref IS NOT NULL;

-- The shop's received outputs a batch's PSBT spends: an output is spent by
-- one batch at a time (released when its batch is voided).
CREATE TABLE payout_batch_inputs (
    network       TEXT NOT NULL,
    txid          TEXT NOT NULL,
    output_index  BIGINT NOT NULL,
    batch_ref     TEXT NOT NULL REFERENCES payout_batches(ref),
    released      BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (network, txid, output_index, batch_ref)
);
CREATE UNIQUE INDEX payout_batch_inputs_spent_once ON payout_batch_inputs (network, txid, output_index) WHERE NOT released;

-- Each payout's moves, for its timeline (the customer's page and the console).
CREATE TABLE payout_events (
    id          BIGSERIAL PRIMARY KEY,
    payout_ref  TEXT NOT NULL REFERENCES payouts(ref),
    status      TEXT NOT NULL,
    message     TEXT NOT NULL,
    actor       TEXT NOT NULL DEFAULT '',
    data        JSONB NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX payout_events_ref_idx ON payout_events (payout_ref, id);

ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_kind_check,
    ADD CONSTRAINT ledger_transactions_kind_check CHECK (kind IN ('topup', 'order_payment', 'refund', 'reversal', 'payout'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_ledger_account_check,
    ADD CONSTRAINT ledger_entries_ledger_account_check
        CHECK (ledger_account ~ '^(customer:[0-9]+|crypto_receipts|revenue|refunds|reversals|payouts_held|payouts_sent)$');

-- A payout's watch: its address is the customer's and may be paid out to
-- more than once; the deposit requests' unique address stays theirs.
ALTER TABLE payment_intents DROP CONSTRAINT payment_intents_target_kind_check,
    ADD CONSTRAINT payment_intents_target_kind_check CHECK (target_kind IN ('order', 'topup', 'payout'));
DROP INDEX payment_intents_address_key;
CREATE UNIQUE INDEX payment_intents_address_key ON payment_intents (network, lower(address))
    WHERE network <> 'solana' AND target_kind <> 'payout';
-- ... and no derivation index: the address is not the shop's.
ALTER TABLE payment_intents DROP CONSTRAINT payment_intents_check3,
    ADD CONSTRAINT payment_intents_derivation_check
        CHECK ((network = 'solana' OR target_kind = 'payout') = (derivation_index IS NULL));
CREATE INDEX payment_intents_payout_address ON payment_intents (network, lower(address)) WHERE target_kind = 'payout';
-- A batch watches one request per payout, all open together.
DROP INDEX payment_intents_one_open;
CREATE UNIQUE INDEX payment_intents_one_open ON payment_intents (target_ref) WHERE status = 'open' AND target_kind <> 'payout';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DELETE FROM chain_payments WHERE intent_id IN (SELECT id FROM payment_intents WHERE target_kind = 'payout');
DELETE FROM payment_intents WHERE target_kind = 'payout';
ALTER TABLE payment_intents DROP CONSTRAINT payment_intents_derivation_check,
    ADD CONSTRAINT payment_intents_check3 CHECK ((network = 'solana') = (derivation_index IS NULL));
DROP INDEX payment_intents_one_open;
CREATE UNIQUE INDEX payment_intents_one_open ON payment_intents (target_ref) WHERE status = 'open';
DROP INDEX payment_intents_payout_address;
DROP INDEX payment_intents_address_key;
CREATE UNIQUE INDEX payment_intents_address_key ON payment_intents (network, lower(address)) WHERE network <> 'solana';
ALTER TABLE payment_intents DROP CONSTRAINT payment_intents_target_kind_check,
    ADD CONSTRAINT payment_intents_target_kind_check CHECK (target_kind IN ('order', 'topup'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_ledger_account_check,
    ADD CONSTRAINT ledger_entries_ledger_account_check
        CHECK (ledger_account ~ '^(customer:[0-9]+|crypto_receipts|revenue|refunds|reversals)$');
ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_kind_check,
    ADD CONSTRAINT ledger_transactions_kind_check CHECK (kind IN ('topup', 'order_payment', 'refund', 'reversal'));
DROP TABLE payout_events;
DROP TABLE payout_batch_inputs;
DROP TABLE payouts;
DROP TABLE payout_batches;
-- +goose StatementEnd
