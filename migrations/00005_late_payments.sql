-- Confirmed payments that were not counted toward the order (paid after the
-- payment request's deadline): support accepts them (attribution) or refunds
-- them to the balance, so they are part of what a refund may return.
-- +goose Up
ALTER TABLE orders ADD COLUMN late_cents BIGINT NOT NULL DEFAULT 0 CHECK (late_cents >= 0);

-- +goose Down
ALTER TABLE orders DROP COLUMN late_cents;
