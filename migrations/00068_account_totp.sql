-- A customer's second factor (issue 39, item 3): a TOTP secret (RFC 6238),
-- sealed with the keyring by the API (bound to the account: a ciphertext
-- copied to another account's row does not open), never readable by
-- support or in a dump without the keyring. enabled_at NULL is a setup
-- not confirmed yet: 2FA stays off until a first code is confirmed.
-- last_step is the last time step accepted: a code is never accepted
-- twice. Recovery codes are kept as SHA-256 hashes, each used once.
-- Login challenges are the password step's pending logins: a token's hash,
-- short-lived, that only the code step turns into a session.
-- +goose Up
CREATE TABLE account_totp (
    account_id     BIGINT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    secret_sealed  TEXT NOT NULL CHECK (length(secret_sealed) > 0),
    enabled_at     TIMESTAMPTZ,
    last_step      BIGINT NOT NULL DEFAULT 0,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE account_recovery_codes (
    account_id  BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    code_hash   BYTEA NOT NULL CHECK (length(code_hash) = 32),
    used_at     TIMESTAMPTZ,
    PRIMARY KEY (account_id, code_hash)
);
CREATE TABLE login_challenges (
    token_hash  BYTEA PRIMARY KEY CHECK (length(token_hash) = 32),
    account_id  BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX login_challenges_expiry ON login_challenges (expires_at);

-- +goose Down
DROP TABLE login_challenges;
DROP TABLE account_recovery_codes;
DROP TABLE account_totp;
