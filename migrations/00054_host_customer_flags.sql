-- A host its customer made dirty on purpose (host_reservations.customer_flag,
-- issue 20) waits in support's queue until an agent closes it (action
-- close_host_flag, recorded in support_actions with who and why):
-- customer_flag_at is when the teardown first reported it, closed_at/by
-- when and by whom support closed it. A new report on the same
-- reservation opens it again, and wakes the live console as the queue's
-- other entries do (notification 'timeline' with the order's reference).
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
CREATE FUNCTION host_flag_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('timeline', NEW.order_ref);
    RETURN NEW;
END $$;
CREATE TRIGGER host_reservations_flag_notify AFTER UPDATE OF customer_flag, customer_flag_closed_at ON host_reservations
    FOR EACH ROW WHEN (NEW.customer_flag IS DISTINCT FROM OLD.customer_flag
        OR NEW.customer_flag_closed_at IS DISTINCT FROM OLD.customer_flag_closed_at)
    EXECUTE FUNCTION host_flag_notify();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER host_reservations_flag_notify ON host_reservations;
DROP FUNCTION host_flag_notify();
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
