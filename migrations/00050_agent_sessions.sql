-- Support console sessions (issue 22): an agent exchanges the token of
-- KERNODECK_SUPPORT_TOKENS for a session of the browser console. Like a
-- customer's session, only the SHA-256 of the session token is stored, with
-- its CSRF token. token_fp is a fingerprint of the agent token the session
-- was opened with: a session is accepted only while that token is still
-- configured for that agent, so removing or rotating an agent's token ends
-- its sessions too. Sign-out deletes the row; operators can end an agent's
-- sessions with DELETE FROM agent_sessions WHERE agent = '...'.
-- +goose Up
CREATE TABLE agent_sessions (
    token_hash    BYTEA PRIMARY KEY CHECK (length(token_hash) = 32),
    agent         TEXT NOT NULL CHECK (length(agent) BETWEEN 1 AND 200),
    token_fp      BYTEA NOT NULL CHECK (length(token_fp) = 16),
    csrf_token    TEXT NOT NULL,
    client_ip     TEXT NOT NULL DEFAULT '',
    user_agent    TEXT NOT NULL DEFAULT '',
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ NOT NULL,
    idle_timeout  INTERVAL NOT NULL
);
CREATE INDEX agent_sessions_agent_idx ON agent_sessions (agent);

-- +goose Down
DROP TABLE IF EXISTS agent_sessions;
