-- The order and top-up views read each payment request's claims ("J'ai
-- payé") by request: without an index every read scanned all claims.
-- +goose Up
CREATE INDEX payment_claims_intent_idx ON payment_claims (intent_id, id);

-- +goose Down
DROP INDEX payment_claims_intent_idx;
