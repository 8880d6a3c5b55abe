-- What a top-up's workflow has counted toward it (confirmed payments and
-- attributions, less reversals), written with each of its transitions: a
-- partly paid top-up shows what came in. NULL until its workflow says.
-- +goose Up
ALTER TABLE topups ADD COLUMN received_cents BIGINT CHECK (received_cents >= 0);

-- +goose Down
ALTER TABLE topups DROP COLUMN received_cents;
