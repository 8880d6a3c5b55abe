-- A new block adds a confirmation to every payment mined and not yet
-- confirmed on its network, without a timeline entry: wake the live pages
-- of their orders and top-ups at once (the 'timeline' channel carries the
-- reference), rather than at their next poll.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION chain_block_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r TEXT;
BEGIN
    FOR r IN SELECT DISTINCT i.target_ref FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
        WHERE p.network = NEW.network AND p.state = 'seen' AND p.block_height <= NEW.height
    LOOP
        PERFORM pg_notify('timeline', r);
    END LOOP;
    RETURN NEW;
END $$;
CREATE TRIGGER chain_blocks_notify AFTER INSERT OR UPDATE ON chain_blocks
    FOR EACH ROW EXECUTE FUNCTION chain_block_notify();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER IF EXISTS chain_blocks_notify ON chain_blocks;
DROP FUNCTION IF EXISTS chain_block_notify();
-- +goose StatementEnd
