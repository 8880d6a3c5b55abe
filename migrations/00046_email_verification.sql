-- Email verification (issue 19, rule 5): an address is confirmed before it
-- gets any mail but the confirmation link, and an unconfirmed account holds
-- at most one unpaid order.
--
-- email_verified_at defaults to now(): accounts that exist today, and those
-- operators or fixtures insert by hand, count as verified; registration
-- (postgres.RegisterAccount) inserts NULL explicitly.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE accounts ADD COLUMN email_verified_at TIMESTAMPTZ DEFAULT now();
UPDATE accounts SET email_verified_at = created_at WHERE email_verified_at IS NULL;

-- The unpaid-order limit of an unconfirmed account is decided here, whoever
-- inserts the order: the account's row is locked first, so two orders
-- created at once are decided one after the other (each statement of a
-- PL/pgSQL function takes a new snapshot, so the second sees the first).
CREATE FUNCTION orders_unverified_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM accounts WHERE id = NEW.account_id AND email_verified_at IS NULL FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM orders WHERE account_id = NEW.account_id
            AND status IN ('awaiting_payment', 'payment_detected')) THEN
        RAISE EXCEPTION 'account % has not confirmed its email: one unpaid order at most', NEW.account_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'orders_unverified_one_unpaid';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER orders_unverified_limit BEFORE INSERT ON orders
    FOR EACH ROW EXECUTE FUNCTION orders_unverified_limit();

-- Resend limits count an account's confirmation mails.
CREATE INDEX mail_outbox_verification_idx ON mail_outbox (account_id, created_at)
    WHERE template = 'email_verification';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP INDEX IF EXISTS mail_outbox_verification_idx;
DROP TRIGGER IF EXISTS orders_unverified_limit ON orders;
DROP FUNCTION IF EXISTS orders_unverified_limit();
ALTER TABLE accounts DROP COLUMN IF EXISTS email_verified_at;
-- +goose StatementEnd
