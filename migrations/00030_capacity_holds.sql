-- Capacity is held for an order from its payment request (or balance
-- payment) until provisioning takes it, so money is only asked for capacity
-- that exists and a paid order never waits for a host sold meanwhile.
-- +goose Up
-- +goose StatementBegin
CREATE TABLE capacity_holds (
    id          BIGSERIAL PRIMARY KEY,
    order_ref   TEXT NOT NULL REFERENCES orders(ref),
    gpu_model   TEXT NOT NULL REFERENCES gpu_models(model) ON UPDATE CASCADE,
    gpus        INT NOT NULL CHECK (gpus > 0),
    -- The host held (SSH driver); NULL with the local driver, which counts GPUs.
    host_id     BIGINT REFERENCES gpu_hosts(id) ON DELETE CASCADE,
    -- End of the payment window; a payment seen or made by then keeps the
    -- hold until provisioning (see live_capacity_holds).
    held_until  TIMESTAMPTZ NOT NULL,
    state       TEXT NOT NULL DEFAULT 'held' CHECK (state IN ('held', 'consumed', 'released')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX capacity_holds_order_held ON capacity_holds (order_ref) WHERE state = 'held';
CREATE INDEX capacity_holds_model_held ON capacity_holds (gpu_model) WHERE state = 'held';

-- The one rule for "this hold still counts": the order is paid (or its
-- payment seen) and not provisioned yet, or it still awaits payment within
-- the window. Holds of cancelled, expired or refunded orders never count.
CREATE VIEW live_capacity_holds AS
SELECT h.*
FROM capacity_holds h JOIN orders o ON o.ref = h.order_ref
WHERE h.state = 'held'
  AND (o.status IN ('payment_detected', 'paid', 'provisioning', 'provisioning_failed')
       OR (o.status = 'awaiting_payment' AND h.held_until > now()));
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP VIEW IF EXISTS live_capacity_holds;
DROP TABLE IF EXISTS capacity_holds;
-- +goose StatementEnd
