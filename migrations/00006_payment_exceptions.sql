-- Money always has a way out: every received amount that is not counted
-- toward its order or top-up (late, over the total, after it no longer
-- awaited payment, partial before it expired, after its workflow closed)
-- is a row here until support counts or refunds all of it. late_cents is
-- now derived from these rows (one home for late money).
-- +goose Up
-- +goose StatementBegin
CREATE TABLE payment_exceptions (
    id              BIGSERIAL PRIMARY KEY,
    target_kind     TEXT NOT NULL CHECK (target_kind IN ('order', 'topup')),
    target_ref      TEXT NOT NULL,
    account_id      BIGINT NOT NULL REFERENCES accounts(id),
    reason          TEXT NOT NULL CHECK (reason IN ('late', 'over', 'extra', 'partial', 'after_close')),
    payment_key     TEXT NOT NULL,   -- network:txid:index of the money
    network         TEXT NOT NULL DEFAULT '',
    txid            TEXT NOT NULL DEFAULT '',
    asset           TEXT NOT NULL DEFAULT '',
    amount_base     TEXT NOT NULL DEFAULT '',
    amount_cents    BIGINT NOT NULL CHECK (amount_cents > 0),
    counted_cents   BIGINT NOT NULL DEFAULT 0 CHECK (counted_cents >= 0),
    refunded_cents  BIGINT NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0),
    CHECK (counted_cents + refunded_cents <= amount_cents),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at      TIMESTAMPTZ,
    -- One row per reason and payment: a retried transition adds nothing.
    UNIQUE (target_ref, reason, payment_key)
);
CREATE INDEX payment_exceptions_open_idx ON payment_exceptions (created_at, id)
    WHERE counted_cents + refunded_cents < amount_cents;
CREATE INDEX payment_exceptions_txid_idx ON payment_exceptions (txid);

-- Late money already recorded on orders moves to the queue.
INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, amount_cents)
    SELECT 'order', ref, account_id, 'late', 'migrated:late', late_cents FROM orders WHERE late_cents > 0;
ALTER TABLE orders DROP COLUMN late_cents;

-- Attributions that name no received payment: counted toward the order,
-- never refundable.
ALTER TABLE orders ADD COLUMN unbacked_cents BIGINT NOT NULL DEFAULT 0 CHECK (unbacked_cents >= 0);

ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception'));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE orders DROP COLUMN unbacked_cents;
ALTER TABLE orders ADD COLUMN late_cents BIGINT NOT NULL DEFAULT 0 CHECK (late_cents >= 0);
DROP TABLE payment_exceptions;
-- +goose StatementEnd
