-- Indexes for the hot reads:
-- - the order and top-up views read each payment request's claims ("J'ai
--   payé") by request: without an index every read scanned all claims;
-- - the free GPU count (quotes, capacity holds, the local driver's
--   reservation) sums a model's live reservations: released ones, the
--   whole history, are no longer scanned.
-- +goose Up
CREATE INDEX payment_claims_intent_idx ON payment_claims (intent_id, id);
CREATE INDEX gpu_reservations_live_idx ON gpu_reservations (gpu_model) INCLUDE (gpus) WHERE state <> 'released';

-- +goose Down
DROP INDEX gpu_reservations_live_idx;
DROP INDEX payment_claims_intent_idx;
