-- Unique amounts only where requests share an address (Solana: every
-- request pays the shop's address, and a payment without its reference is
-- matched by amount), and only while the request is watched: an amount is
-- reserved until the request's watch_until, then free again. Requests with
-- an address of their own need no unique amount.
-- +goose Up
-- +goose StatementBegin
DROP INDEX payment_intents_amount_key;
CREATE TABLE shared_address_amounts (
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    amount_base     NUMERIC(78, 0) NOT NULL CHECK (amount_base > 0),
    -- Reserved before the request's row is written, in its transaction.
    intent_id       TEXT NOT NULL REFERENCES payment_intents(id) DEFERRABLE INITIALLY DEFERRED,
    reserved_until  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (network, asset, amount_base)
);
INSERT INTO shared_address_amounts (network, asset, amount_base, intent_id, reserved_until)
    SELECT network, asset, amount_base, id, watch_until FROM payment_intents WHERE network = 'solana';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE shared_address_amounts;
CREATE UNIQUE INDEX payment_intents_amount_key ON payment_intents (network, asset, amount_base);
-- +goose StatementEnd
