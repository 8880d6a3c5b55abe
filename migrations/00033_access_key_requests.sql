-- A customer's request to change the SSH key of a running rental: replace
-- it with their own public key, or reissue a generated pair. The API writes
-- the request; the worker, which holds the hosts' admin key, applies it
-- (provision/sshhost.KeyRequests). One pending request per order.
-- +goose Up
-- +goose StatementBegin
CREATE TABLE access_key_requests (
    id          BIGSERIAL PRIMARY KEY,
    order_ref   TEXT NOT NULL REFERENCES orders(ref),
    kind        TEXT NOT NULL CHECK (kind IN ('replace', 'reissue')),
    public_key  TEXT CHECK (public_key IS NULL OR length(public_key) <= 16384),
    state       TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    attempts    INT NOT NULL DEFAULT 0,
    -- A worker applying it holds it until then (a crashed one lets it go).
    claimed_until TIMESTAMPTZ,
    -- French, for the customer: why it failed.
    failure     TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    done_at     TIMESTAMPTZ,
    CHECK ((kind = 'replace') = (public_key IS NOT NULL))
);
CREATE UNIQUE INDEX access_key_requests_pending ON access_key_requests (order_ref) WHERE state = 'pending';
CREATE INDEX access_key_requests_order ON access_key_requests (order_ref, id);
-- +goose StatementEnd

-- +goose Down
DROP TABLE IF EXISTS access_key_requests;
