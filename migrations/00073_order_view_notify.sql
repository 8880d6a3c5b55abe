-- The owner's view of an order is cached in each API process
-- (postgres/order_views.go): every table it reads announces a change of
-- an order on the 'order_view' channel with the order's (or top-up's)
-- reference, and '*' for what every view shows (GPU models). The chain's
-- tip is not cached (read with the session), nor anything else that moves
-- with the clock alone. TestOrderViewTablesNotify holds this list to the
-- view's statement.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION order_view_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r TEXT;
BEGIN
    IF TG_ARGV[0] = '*' THEN
        PERFORM pg_notify('order_view', '*');
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF TG_ARGV[0] = 'intent_id' THEN
            SELECT i.target_ref INTO r FROM payment_intents i WHERE i.id = OLD.intent_id;
        ELSE
            r := to_jsonb(OLD) ->> TG_ARGV[0];
        END IF;
        IF r IS NOT NULL THEN
            PERFORM pg_notify('order_view', r);
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        IF TG_ARGV[0] = 'intent_id' THEN
            SELECT i.target_ref INTO r FROM payment_intents i WHERE i.id = NEW.intent_id;
        ELSE
            r := to_jsonb(NEW) ->> TG_ARGV[0];
        END IF;
        IF r IS NOT NULL THEN
            PERFORM pg_notify('order_view', r);
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER orders_order_view AFTER UPDATE OR DELETE ON orders
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('ref');
CREATE TRIGGER timeline_events_order_view AFTER INSERT OR UPDATE OR DELETE ON timeline_events
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('ref');
CREATE TRIGGER payment_intents_order_view AFTER INSERT OR UPDATE OR DELETE ON payment_intents
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('target_ref');
CREATE TRIGGER payment_claims_order_view AFTER INSERT OR UPDATE OR DELETE ON payment_claims
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('intent_id');
CREATE TRIGGER chain_payments_order_view AFTER INSERT OR UPDATE OR DELETE ON chain_payments
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('intent_id');
CREATE TRIGGER order_access_order_view AFTER INSERT OR UPDATE OR DELETE ON order_access
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('order_ref');
CREATE TRIGGER capacity_holds_order_view AFTER INSERT OR UPDATE OR DELETE ON capacity_holds
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('order_ref');
CREATE TRIGGER payment_exceptions_order_view AFTER INSERT OR UPDATE OR DELETE ON payment_exceptions
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('target_ref');
CREATE TRIGGER support_requests_order_view AFTER INSERT OR UPDATE OR DELETE ON support_requests
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('order_ref');
CREATE TRIGGER access_key_requests_order_view AFTER INSERT OR UPDATE OR DELETE ON access_key_requests
    FOR EACH ROW EXECUTE FUNCTION order_view_notify('order_ref');
CREATE TRIGGER gpu_models_order_view AFTER INSERT OR UPDATE OR DELETE ON gpu_models
    FOR EACH STATEMENT EXECUTE FUNCTION order_view_notify('*');
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER gpu_models_order_view ON gpu_models;
DROP TRIGGER access_key_requests_order_view ON access_key_requests;
DROP TRIGGER support_requests_order_view ON support_requests;
DROP TRIGGER payment_exceptions_order_view ON payment_exceptions;
DROP TRIGGER capacity_holds_order_view ON capacity_holds;
DROP TRIGGER order_access_order_view ON order_access;
DROP TRIGGER chain_payments_order_view ON chain_payments;
DROP TRIGGER payment_claims_order_view ON payment_claims;
DROP TRIGGER payment_intents_order_view ON payment_intents;
DROP TRIGGER timeline_events_order_view ON timeline_events;
DROP TRIGGER orders_order_view ON orders;
DROP FUNCTION order_view_notify();
-- +goose StatementEnd
