-- Live streams (SSE) open now, per session and per account (issue 19,
-- rule 4), so every API replica counts the same streams. Each row is a
-- lease its stream renews while it runs: a stream whose process died
-- frees its place when the lease expires.
-- +goose Up
-- +goose StatementBegin
CREATE TABLE live_streams (
    id          BIGSERIAL PRIMARY KEY,
    account_id  BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    -- The session's token hash, as in sessions.token_hash.
    session     BYTEA NOT NULL,
    opened_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX live_streams_account_idx ON live_streams (account_id, expires_at);
CREATE INDEX live_streams_expires_idx ON live_streams (expires_at);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE IF EXISTS live_streams;
-- +goose StatementEnd
