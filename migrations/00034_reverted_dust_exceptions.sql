-- Issue 11 in the queue: a payment removed by a deep reorganisation after
-- its confirmation voids its queued remainders (voided_cents) and, once
-- provisioning started or a top-up was credited, is flagged for support
-- ('reverted': not money, resolved by support or when the payment comes
-- back); a payment request's dust total is one 'dust' row kept up to date.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_reason_check,
    ADD CONSTRAINT payment_exceptions_reason_check CHECK (reason IN ('late', 'over', 'extra', 'partial',
        'after_close', 'dust', 'reverted'));
ALTER TABLE payment_exceptions
    ADD COLUMN voided_cents BIGINT NOT NULL DEFAULT 0 CHECK (voided_cents >= 0),
    ADD COLUMN shortfall_cents BIGINT NOT NULL DEFAULT 0 CHECK (shortfall_cents >= 0),
    ADD COLUMN resolved_at TIMESTAMPTZ,
    ADD COLUMN resolved_by TEXT,
    ADD COLUMN resolution TEXT CHECK (resolution IN ('acknowledged', 'remined'));
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_check,
    ADD CONSTRAINT payment_exceptions_used_check CHECK (counted_cents + refunded_cents + voided_cents <= amount_cents);
DROP INDEX payment_exceptions_open_idx;
CREATE INDEX payment_exceptions_open_idx ON payment_exceptions (created_at, id)
    WHERE (reason <> 'reverted' AND counted_cents + refunded_cents + voided_cents < amount_cents)
        OR (reason = 'reverted' AND resolved_at IS NULL);
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception'));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DELETE FROM payment_exceptions WHERE reason IN ('dust', 'reverted');
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception'));
DROP INDEX payment_exceptions_open_idx;
CREATE INDEX payment_exceptions_open_idx ON payment_exceptions (created_at, id)
    WHERE counted_cents + refunded_cents < amount_cents;
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_used_check,
    ADD CONSTRAINT payment_exceptions_check CHECK (counted_cents + refunded_cents <= amount_cents);
ALTER TABLE payment_exceptions DROP COLUMN voided_cents, DROP COLUMN shortfall_cents, DROP COLUMN resolved_at,
    DROP COLUMN resolved_by, DROP COLUMN resolution;
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_reason_check,
    ADD CONSTRAINT payment_exceptions_reason_check CHECK (reason IN ('late', 'over', 'extra', 'partial', 'after_close'));
-- +goose StatementEnd
