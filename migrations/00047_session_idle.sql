-- Sessions end after a time unused (issue 19, rule 6): last_used_at is
-- moved forward at most every few minutes (not a write per request), and
-- each session keeps the idle timeout it was opened with.
-- +goose Up
ALTER TABLE sessions
    ADD COLUMN last_used_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    ADD COLUMN idle_timeout INTERVAL NOT NULL DEFAULT interval '7 days';

-- +goose Down
ALTER TABLE sessions DROP COLUMN IF EXISTS last_used_at, DROP COLUMN IF EXISTS idle_timeout;
