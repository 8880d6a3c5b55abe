-- No agent alone moves large money (issue 36, item 3). money_cents is what
-- a support action moves (credited to a balance or counted), written with
-- the row; it counts toward its agent's daily cap. An action above the
-- four-eyes threshold is recorded with needs_approval and carried out only
-- once a second agent approved it (reviewed_by, never its own agent);
-- declined, it ends with outcome 'declined'. The review is written once,
-- before any outcome.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE support_actions
    ADD COLUMN money_cents BIGINT NOT NULL DEFAULT 0 CHECK (money_cents >= 0),
    ADD COLUMN needs_approval BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN reviewed_by TEXT CHECK (length(reviewed_by) > 0),
    ADD COLUMN review_reason TEXT CHECK (length(review_reason) BETWEEN 3 AND 2000),
    ADD COLUMN approved BOOLEAN,
    ADD COLUMN reviewed_at TIMESTAMPTZ,
    ADD CONSTRAINT support_actions_second_agent CHECK (reviewed_by <> agent),
    ADD CONSTRAINT support_actions_review_whole CHECK (
        (reviewed_by IS NULL AND approved IS NULL AND reviewed_at IS NULL AND review_reason IS NULL)
        OR (needs_approval AND reviewed_by IS NOT NULL AND approved IS NOT NULL AND reviewed_at IS NOT NULL
            AND review_reason IS NOT NULL)),
    ADD CONSTRAINT support_actions_run_approved CHECK (
        NOT needs_approval OR outcome IS NULL OR (approved IS NOT NULL AND (outcome = 'declined') = NOT approved)),
    DROP CONSTRAINT support_actions_outcome_check,
    ADD CONSTRAINT support_actions_outcome_check CHECK (outcome IN ('done', 'rejected', 'failed', 'declined'));
-- The daily cap sums an agent's recent money actions.
CREATE INDEX support_actions_agent_money_idx ON support_actions (agent, created_at) WHERE money_cents > 0;
CREATE INDEX support_actions_awaiting_idx ON support_actions (id) WHERE needs_approval AND reviewed_by IS NULL;

CREATE OR REPLACE FUNCTION support_actions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'support_actions is append-only';
    END IF;
    IF OLD.outcome IS NOT NULL
       OR NEW.id <> OLD.id OR NEW.agent <> OLD.agent OR NEW.action <> OLD.action
       OR NEW.target_ref <> OLD.target_ref OR NEW.reason <> OLD.reason
       OR NEW.params <> OLD.params OR NEW.created_at <> OLD.created_at
       OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
       OR NEW.money_cents <> OLD.money_cents OR NEW.needs_approval <> OLD.needs_approval
       OR (OLD.reviewed_by IS NOT NULL AND (NEW.reviewed_by IS DISTINCT FROM OLD.reviewed_by
           OR NEW.approved IS DISTINCT FROM OLD.approved OR NEW.reviewed_at IS DISTINCT FROM OLD.reviewed_at
           OR NEW.review_reason IS DISTINCT FROM OLD.review_reason)) THEN
        RAISE EXCEPTION 'support_actions: only a missing review or outcome may be written';
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
       OR NEW.params <> OLD.params OR NEW.created_at <> OLD.created_at
       OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key THEN
        RAISE EXCEPTION 'support_actions: only a missing outcome may be written';
    END IF;
    RETURN NEW;
END $$;
DROP INDEX support_actions_awaiting_idx;
DROP INDEX support_actions_agent_money_idx;
ALTER TABLE support_actions
    DROP CONSTRAINT support_actions_outcome_check,
    ADD CONSTRAINT support_actions_outcome_check CHECK (outcome IN ('done', 'rejected', 'failed')),
    DROP CONSTRAINT support_actions_run_approved,
    DROP CONSTRAINT support_actions_review_whole,
    DROP CONSTRAINT support_actions_second_agent,
    DROP COLUMN reviewed_at, DROP COLUMN approved, DROP COLUMN review_reason, DROP COLUMN reviewed_by,
    DROP COLUMN needs_approval, DROP COLUMN money_cents;
-- +goose StatementEnd
