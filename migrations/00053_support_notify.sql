-- The support console's queue and files are live (server-sent events woken
-- by the 'timeline' notifications): what they show without a timeline
-- entry notifies too, with its order's or top-up's reference - a customer's
-- support request, a support action and its outcome, a queued amount
-- created or settled.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION support_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'support_requests' THEN
        PERFORM pg_notify('timeline', NEW.order_ref);
    ELSE
        PERFORM pg_notify('timeline', NEW.target_ref);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER support_requests_notify AFTER INSERT OR UPDATE ON support_requests
    FOR EACH ROW EXECUTE FUNCTION support_notify();
CREATE TRIGGER support_actions_notify AFTER INSERT OR UPDATE ON support_actions
    FOR EACH ROW EXECUTE FUNCTION support_notify();
CREATE TRIGGER payment_exceptions_notify AFTER INSERT OR UPDATE ON payment_exceptions
    FOR EACH ROW EXECUTE FUNCTION support_notify();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER payment_exceptions_notify ON payment_exceptions;
DROP TRIGGER support_actions_notify ON support_actions;
DROP TRIGGER support_requests_notify ON support_requests;
DROP FUNCTION support_notify;
-- +goose StatementEnd
