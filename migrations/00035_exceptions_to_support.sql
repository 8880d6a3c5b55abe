-- Payments the watchers record but cannot count (another asset sent to a
-- request's address, a payment after the request's watch window) enter
-- support's queue once confirmed. Another asset has no USD value at the
-- request's rate: it is queued with needs_value set and 0 cents until
-- support states its value (value-exception), after which it is refunded
-- or counted like any queued amount; returned on chain, it is closed at 0.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_reason_check,
    ADD CONSTRAINT payment_exceptions_reason_check CHECK (reason IN ('late', 'over', 'extra', 'partial',
        'after_close', 'dust', 'reverted', 'other_asset', 'not_watched'));
ALTER TABLE payment_exceptions ADD COLUMN needs_value BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_amount_cents_check,
    ADD CONSTRAINT payment_exceptions_amount_cents_check CHECK (amount_cents > 0 OR (amount_cents = 0 AND reason = 'other_asset'));
DROP INDEX payment_exceptions_open_idx;
CREATE INDEX payment_exceptions_open_idx ON payment_exceptions (created_at, id)
    WHERE (reason <> 'reverted' AND counted_cents + refunded_cents + voided_cents < amount_cents)
        OR (reason = 'reverted' AND resolved_at IS NULL) OR needs_value;
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception'));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DELETE FROM support_actions WHERE action = 'value_exception';
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception'));
DELETE FROM payment_exceptions WHERE reason IN ('other_asset', 'not_watched');
DROP INDEX payment_exceptions_open_idx;
CREATE INDEX payment_exceptions_open_idx ON payment_exceptions (created_at, id)
    WHERE (reason <> 'reverted' AND counted_cents + refunded_cents + voided_cents < amount_cents)
        OR (reason = 'reverted' AND resolved_at IS NULL);
ALTER TABLE payment_exceptions DROP COLUMN needs_value;
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_amount_cents_check,
    ADD CONSTRAINT payment_exceptions_amount_cents_check CHECK (amount_cents > 0);
ALTER TABLE payment_exceptions DROP CONSTRAINT payment_exceptions_reason_check,
    ADD CONSTRAINT payment_exceptions_reason_check CHECK (reason IN ('late', 'over', 'extra', 'partial',
        'after_close', 'dust', 'reverted'));
-- +goose StatementEnd
