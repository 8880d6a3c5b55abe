-- How many times a payment was removed by a reorganisation after its
-- confirmation: its generation, sent with every state of it, so a
-- workflow applies a reversal and the payment's confirmation mined again
-- in the chain's order even when it reads them in one batch.
-- +goose Up
ALTER TABLE chain_payments ADD COLUMN reversals INTEGER NOT NULL DEFAULT 0 CHECK (reversals >= 0);

-- +goose Down
ALTER TABLE chain_payments DROP COLUMN reversals;
