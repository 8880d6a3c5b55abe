-- Order refunds paid out on payments a deep reorganisation removed since
-- (written by the rental workflow with the reversal's transition): not
-- owed again by the order, support's to recover, backed again if the
-- payment is mined again.
-- +goose Up
ALTER TABLE orders ADD COLUMN shortfall_cents BIGINT NOT NULL DEFAULT 0 CHECK (shortfall_cents >= 0);

-- +goose Down
ALTER TABLE orders DROP COLUMN shortfall_cents;
