-- Failed authentication attempts, counted per key (see domain.ThrottleRule)
-- and decided atomically under a row lock, so parallel attempts cannot
-- all pass a check made before any of them is recorded. Keys are SHA-256
-- hashes: no email or address is kept here.
-- +goose Up
CREATE TABLE auth_throttle (
    key          BYTEA PRIMARY KEY,
    failures     INT NOT NULL DEFAULT 0 CHECK (failures >= 0),
    window_start TIMESTAMPTZ NOT NULL DEFAULT now(),
    strikes      INT NOT NULL DEFAULT 0 CHECK (strikes >= 0),
    locked_until TIMESTAMPTZ
);
CREATE INDEX auth_throttle_window_idx ON auth_throttle (window_start);
DROP TABLE login_failures;

-- +goose Down
DROP TABLE auth_throttle;
CREATE TABLE login_failures (
    id         BIGSERIAL PRIMARY KEY,
    email      TEXT NOT NULL,
    ip         TEXT NOT NULL,
    at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_email_idx ON login_failures (lower(email), at);
CREATE INDEX login_failures_ip_idx ON login_failures (ip, at);
