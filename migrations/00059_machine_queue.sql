-- A paid order with no free machine waits in line (issue 35): its status is
-- waiting_for_machine, and the line is those orders of a model and size in
-- payment order (paid_at, then ref). The first host freed goes to the
-- oldest: a reservation, or a new hold for an unpaid order, takes a free
-- host only when the paid orders waiting ahead of it leave one.
-- +goose Up
-- +goose StatementBegin
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check CHECK (status IN ('awaiting_payment', 'payment_detected',
    'paid', 'waiting_for_machine', 'provisioning', 'provisioning_failed', 'active', 'ending', 'ended',
    'cancelled', 'expired', 'refunded'));
CREATE INDEX orders_machine_queue_idx ON orders (gpu_model, total_gpus, paid_at, ref)
    WHERE status = 'waiting_for_machine';

-- kd_waiting_ahead counts the paid orders waiting for a machine of model
-- p_model ahead of order p_order: with p_gpus > 0 (one whole host per
-- order) those of that size, else the GPUs they wait for (local driver,
-- GPUs counted). An order not in the line (not waiting, or '') has every
-- waiting order ahead of it.
CREATE FUNCTION kd_waiting_ahead(p_model TEXT, p_gpus INT, p_order TEXT) RETURNS int LANGUAGE sql STABLE AS $$
SELECT COALESCE(CASE WHEN p_gpus > 0 THEN count(*) ELSE SUM(w.total_gpus) END, 0)::int
FROM orders w
LEFT JOIN orders me ON me.ref = p_order AND me.status = 'waiting_for_machine'
WHERE w.status = 'waiting_for_machine' AND w.gpu_model = p_model
  AND (p_gpus <= 0 OR w.total_gpus = p_gpus)
  AND w.ref <> p_order
  AND (me.ref IS NULL OR (w.paid_at, w.ref) < (me.paid_at, me.ref))
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP FUNCTION IF EXISTS kd_waiting_ahead(TEXT, INT, TEXT);
DROP INDEX IF EXISTS orders_machine_queue_idx;
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check CHECK (status IN ('awaiting_payment', 'payment_detected',
    'paid', 'provisioning', 'provisioning_failed', 'active', 'ending', 'ended',
    'cancelled', 'expired', 'refunded'));
-- +goose StatementEnd
