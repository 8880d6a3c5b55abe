-- A customer's account page (issue 22): the account's sessions, each with
-- a public id (the token's hash never leaves the store), the client's
-- User-Agent and network address recorded when it was opened; and the
-- account's own activity (logins, failed logins, password changes,
-- sessions ended), the newest 200 entries per account kept.
-- +goose Up
ALTER TABLE sessions
    ADD COLUMN id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    ADD COLUMN user_agent TEXT NOT NULL DEFAULT '' CHECK (length(user_agent) <= 512),
    ADD COLUMN client_ip TEXT NOT NULL DEFAULT '' CHECK (length(client_ip) <= 64);

CREATE TABLE account_activity (
    id          BIGSERIAL PRIMARY KEY,
    account_id  BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('login', 'login_failed', 'password_changed', 'session_ended', 'sessions_ended')),
    user_agent  TEXT NOT NULL DEFAULT '' CHECK (length(user_agent) <= 512),
    client_ip   TEXT NOT NULL DEFAULT '' CHECK (length(client_ip) <= 64),
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX account_activity_account_idx ON account_activity (account_id, id DESC);

-- +goose Down
DROP TABLE IF EXISTS account_activity;
ALTER TABLE sessions DROP COLUMN IF EXISTS id, DROP COLUMN IF EXISTS user_agent, DROP COLUMN IF EXISTS client_ip;
