-- Support actions are idempotent (issue 36, item 4): every support action
-- request carries a single-use key (header Idempotency-Key), unique per
-- agent. The same key sent again finds its first action and answers what
-- it answered (answer_error: the refusal or failure sent back, null when
-- done), without carrying the action out again. Actions recorded before,
-- and the customer's own take-back, have no key.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE support_actions
    ADD COLUMN idempotency_key TEXT CHECK (idempotency_key ~ '^[A-Za-z0-9._:-]{8,128}$'),
    ADD COLUMN answer_error JSONB;
CREATE UNIQUE INDEX support_actions_idempotency_key_idx ON support_actions (agent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The key is the request's: written with the row, never changed; the
-- answer is written with the outcome, once.
CREATE OR REPLACE FUNCTION support_actions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'support_actions is append-only';
    END IF;
    IF OLD.outcome IS NOT NULL
       OR NEW.id <> OLD.id OR NEW.agent <> OLD.agent OR NEW.action <> OLD.action
       OR NEW.target_ref <> OLD.target_ref OR NEW.reason <> OLD.reason
       OR NEW.params <> OLD.params OR NEW.created_at <> OLD.created_at
       OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key THEN
        RAISE EXCEPTION 'support_actions: only a missing outcome may be written';
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION support_actions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'support_actions is append-only';
    END IF;
    IF OLD.outcome IS NOT NULL
       OR NEW.id <> OLD.id OR NEW.agent <> OLD.agent OR NEW.action <> OLD.action
       OR NEW.target_ref <> OLD.target_ref OR NEW.reason <> OLD.reason
       OR NEW.params <> OLD.params OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'support_actions: only a missing outcome may be written';
    END IF;
    RETURN NEW;
END $$;
DROP INDEX support_actions_idempotency_key_idx;
ALTER TABLE support_actions DROP COLUMN answer_error, DROP COLUMN idempotency_key;
-- +goose StatementEnd
