-- A host its customer made dirty on purpose (host_reservations.customer_flag,
-- issue 20) waits in support's queue until an agent closes it (action
-- close_host_flag, recorded in support_actions with who and why):
-- customer_flag_at is when the teardown first reported it, closed_at/by
-- when and by whom support closed it. A new report on the same
-- reservation opens it again.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE host_reservations ADD COLUMN customer_flag_at TIMESTAMPTZ,
    ADD COLUMN customer_flag_closed_at TIMESTAMPTZ,
    ADD COLUMN customer_flag_closed_by TEXT;
UPDATE host_reservations SET customer_flag_at = COALESCE(released_at, created_at) WHERE customer_flag IS NOT NULL;
CREATE INDEX host_reservations_open_flag_idx ON host_reservations (customer_flag_at, id)
    WHERE customer_flag IS NOT NULL AND customer_flag_closed_at IS NULL;
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception',
        'repair_host', 'retire_host', 'close_host_flag'));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE support_actions DISABLE TRIGGER support_actions_guard;
DELETE FROM support_actions WHERE action = 'close_host_flag';
ALTER TABLE support_actions ENABLE TRIGGER support_actions_guard;
ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check,
    ADD CONSTRAINT support_actions_action_check CHECK (action IN ('attribute_payment', 'extend', 'end_early',
        'retry_provisioning', 'cancel', 'refund', 'refund_exception', 'resolve_exception', 'value_exception',
        'repair_host', 'retire_host'));
DROP INDEX host_reservations_open_flag_idx;
ALTER TABLE host_reservations DROP COLUMN customer_flag_at, DROP COLUMN customer_flag_closed_at,
    DROP COLUMN customer_flag_closed_by;
-- +goose StatementEnd
