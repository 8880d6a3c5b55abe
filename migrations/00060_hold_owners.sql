-- A hold belongs to whoever took it (issue 35): the account and the client
-- network (the hash orders.hold_network had when the hold was taken: the
-- network of the latest ask) are recorded on the hold when it is taken and
-- never rewritten, so a new ask from another network no longer moves the
-- hold's count there. The unpaid-hold counts and the daily budget of unpaid
-- hold time are counted on these columns.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE capacity_holds ADD COLUMN account_id BIGINT REFERENCES accounts(id), ADD COLUMN network BYTEA;
UPDATE capacity_holds h SET account_id = o.account_id, network = o.hold_network FROM orders o WHERE o.ref = h.order_ref;
ALTER TABLE capacity_holds ALTER COLUMN account_id SET NOT NULL;

-- The owners are the order's at insertion when the insert names none (a
-- hold is always taken for its order's account, from its latest network);
-- afterwards they never change.
CREATE FUNCTION kd_hold_owners() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.account_id IS NULL THEN
            SELECT o.account_id, COALESCE(NEW.network, o.hold_network) INTO NEW.account_id, NEW.network
            FROM orders o WHERE o.ref = NEW.order_ref;
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.account_id IS DISTINCT FROM OLD.account_id OR NEW.network IS DISTINCT FROM OLD.network THEN
        RAISE EXCEPTION 'the owners of capacity hold % are never rewritten', OLD.id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER capacity_holds_owners BEFORE INSERT OR UPDATE ON capacity_holds
    FOR EACH ROW EXECUTE FUNCTION kd_hold_owners();

-- The budget reads an owner's holds of the last 24 hours.
CREATE INDEX capacity_holds_account_created ON capacity_holds (account_id, created_at);
CREATE INDEX capacity_holds_network_created ON capacity_holds (network, created_at) WHERE network IS NOT NULL;

-- The view's h.* was expanded when it was made: again, with the owners.
CREATE OR REPLACE VIEW live_capacity_holds AS
SELECT h.*
FROM capacity_holds h JOIN orders o ON o.ref = h.order_ref
WHERE h.state = 'held'
  AND (o.status IN ('payment_detected', 'paid', 'provisioning', 'provisioning_failed')
       OR (o.status = 'awaiting_payment' AND h.held_until > now()));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP VIEW IF EXISTS live_capacity_holds;
CREATE VIEW live_capacity_holds AS
SELECT h.id, h.order_ref, h.gpu_model, h.gpus, h.host_id, h.held_until, h.state, h.created_at, h.updated_at
FROM capacity_holds h JOIN orders o ON o.ref = h.order_ref
WHERE h.state = 'held'
  AND (o.status IN ('payment_detected', 'paid', 'provisioning', 'provisioning_failed')
       OR (o.status = 'awaiting_payment' AND h.held_until > now()));
DROP TRIGGER IF EXISTS capacity_holds_owners ON capacity_holds;
DROP FUNCTION IF EXISTS kd_hold_owners();
DROP INDEX IF EXISTS capacity_holds_network_created;
DROP INDEX IF EXISTS capacity_holds_account_created;
ALTER TABLE capacity_holds DROP COLUMN IF EXISTS network, DROP COLUMN IF EXISTS account_id;
-- +goose StatementEnd
