-- The owner's view of an order is cached in each API process
-- (postgres/order_views.go): every table it reads announces a change of
-- an order on the 'order_view' channel with the order's (or top-up's)
-- reference, and '*' for what every view shows (GPU models). The chain's
-- tip is not cached (read with the session), nor anything else that moves
-- with the clock alone. TestOrderViewTablesNotify holds this list to the
-- view's statement.
-- +goose Up
-- +goose StatementBegin
-- order_view_ref is the reference a changed row r names through its column
-- col ('intent_id': its payment request's target).
CREATE FUNCTION order_view_ref(col TEXT, r JSONB) RETURNS TEXT LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN col = 'intent_id'
        THEN (SELECT i.target_ref FROM payment_intents i WHERE i.id = r ->> 'intent_id')
        ELSE r ->> col END
$$;
CREATE FUNCTION order_view_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r TEXT;
BEGIN
    IF TG_ARGV[0] = '*' THEN
        PERFORM pg_notify('order_view', '*');
        RETURN NULL;
    END IF;
    FOREACH r IN ARRAY ARRAY[
        CASE WHEN TG_OP <> 'INSERT' THEN order_view_ref(TG_ARGV[0], to_jsonb(OLD)) END,
        CASE WHEN TG_OP <> 'DELETE' THEN order_view_ref(TG_ARGV[0], to_jsonb(NEW)) END]
    LOOP
        IF r IS NOT NULL THEN
            PERFORM pg_notify('order_view', r);
        END IF;
    END LOOP;
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
DROP FUNCTION order_view_ref(TEXT, JSONB);
-- +goose StatementEnd
