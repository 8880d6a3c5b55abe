-- Customers extend their own rental (issue 39, item 2). An extension adds
-- 3, 7 or 30 days at the catalog's lot price for that length, on the same
-- machine: it is checked and reserved at once (state 'reserved'), then
-- paid, from the balance (reserved and paid in one transaction) or by a
-- crypto payment that goes through a top-up of its exact amount
-- (topups.extension_ref): the top-up credits the balance and the rental's
-- workflow debits it for the extension. A reservation that cannot be paid
-- (its top-up expired or was cancelled, the machine left service, the
-- rental ended first) is 'lapsed' with the reason shown to the customer;
-- whatever was received stays on the balance. One open reservation per
-- order; the reference is derived from the customer's idempotency key, so
-- a retried request is the same extension.
-- +goose Up
CREATE TABLE rental_extensions (
    ref              TEXT PRIMARY KEY,
    order_ref        TEXT NOT NULL REFERENCES orders(ref),
    account_id       BIGINT NOT NULL REFERENCES accounts(id),
    days             INT NOT NULL CHECK (days IN (3, 7, 30)),
    amount_cents     BIGINT NOT NULL CHECK (amount_cents > 0),
    method           TEXT NOT NULL CHECK (method IN ('balance', 'crypto')),
    state            TEXT NOT NULL CHECK (state IN ('reserved', 'paid', 'lapsed')),
    reason           TEXT NOT NULL DEFAULT '',
    host_id          BIGINT REFERENCES gpu_hosts(id) ON DELETE SET NULL,
    held_until       TIMESTAMPTZ NOT NULL,
    period_end       TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    paid_at          TIMESTAMPTZ,
    lapsed_at        TIMESTAMPTZ,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK ((state = 'paid') = (paid_at IS NOT NULL)),
    CHECK ((state = 'lapsed') = (lapsed_at IS NOT NULL))
);
CREATE UNIQUE INDEX rental_extensions_open ON rental_extensions (order_ref) WHERE state = 'reserved';
CREATE INDEX rental_extensions_order ON rental_extensions (order_ref, created_at DESC);

-- A top-up paying an extension has the extension's amount; any other
-- keeps to the offered amounts.
ALTER TABLE topups ADD COLUMN extension_ref TEXT UNIQUE REFERENCES rental_extensions(ref);
ALTER TABLE topups DROP CONSTRAINT topups_amount_cents_check;
ALTER TABLE topups ADD CONSTRAINT topups_amount_check
    CHECK (amount_cents IN (10000, 50000, 200000, 1000000) OR (extension_ref IS NOT NULL AND amount_cents > 0));

-- +goose Down
ALTER TABLE topups DROP CONSTRAINT topups_amount_check;
DELETE FROM topups WHERE extension_ref IS NOT NULL AND amount_cents NOT IN (10000, 50000, 200000, 1000000);
ALTER TABLE topups ADD CONSTRAINT topups_amount_cents_check CHECK (amount_cents IN (10000, 50000, 200000, 1000000));
ALTER TABLE topups DROP COLUMN extension_ref;
DROP TABLE rental_extensions;
