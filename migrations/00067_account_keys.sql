-- The watch-only account key (KERNODECK_XPUB_<NETWORK>) each network's
-- payment addresses are derived from, as first recorded: a process that
-- derives addresses refuses to start with another key until an operator
-- confirms it (`kernodeck xpub confirm NETWORK`), since a changed key
-- silently sends new payments to another wallet (issue 38, item 5).
-- fingerprint is the BIP32 fingerprint operators compare with their
-- wallet's; key_digest (SHA-256 of the public key and chain code) is what
-- is compared, a 4-byte fingerprint being easy to match on purpose. Every
-- change confirmed is kept in account_key_changes.
-- +goose Up
CREATE TABLE account_keys (
    network      TEXT PRIMARY KEY,
    fingerprint  TEXT NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{8}$'),
    key_digest   TEXT NOT NULL CHECK (key_digest ~ '^[0-9a-f]{64}$'),
    recorded_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE account_key_changes (
    id               BIGSERIAL PRIMARY KEY,
    network          TEXT NOT NULL,
    old_fingerprint  TEXT,
    new_fingerprint  TEXT NOT NULL,
    new_key_digest   TEXT NOT NULL,
    confirmed_by     TEXT NOT NULL CHECK (length(confirmed_by) > 0),
    confirmed_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE account_key_changes;
DROP TABLE account_keys;
