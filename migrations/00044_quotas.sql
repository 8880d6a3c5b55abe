-- Quotas on what a free account can create (issue 19, rule 4). Counts of
-- things that exist are read from their own tables under a per-account
-- lock (postgres/quotas.go); what leaves no row of its own is recorded
-- here: each payment request asked for, per order or top-up, so "so many
-- per hour" is decided atomically before the workflow is asked.
-- +goose Up
-- +goose StatementBegin
CREATE TABLE quota_uses (
    id       BIGSERIAL PRIMARY KEY,
    quota    TEXT NOT NULL,
    subject  TEXT NOT NULL,
    used_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX quota_uses_subject_idx ON quota_uses (quota, subject, used_at);
CREATE INDEX quota_uses_used_at_idx ON quota_uses (used_at);

CREATE INDEX support_requests_account_idx ON support_requests (account_id, created_at);
CREATE INDEX topups_open_account_idx ON topups (account_id, created_at) WHERE status = 'awaiting_payment';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP INDEX IF EXISTS topups_open_account_idx;
DROP INDEX IF EXISTS support_requests_account_idx;
DROP TABLE IF EXISTS quota_uses;
-- +goose StatementEnd
