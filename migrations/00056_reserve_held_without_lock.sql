-- A paid order's reservation takes its own hold without the model's
-- capacity lock (issue 23): in a block paying thousands of orders of one
-- model, every reservation waited for that one lock, ~1 s each on 2 cores.
-- The swap is safe unlocked: the hold already takes its GPUs off what any
-- other decision counts (kd_free_gpus reads holds and reservations in one
-- snapshot, so it sees the hold or the reservation, never neither, never
-- both), and a hold that still counts (live_capacity_holds) is never given
-- back by kd_lock_capacity. Both touch the hold's row: whichever comes
-- second sees the other's state. Without such a hold (none, lapsed, or for
-- fewer GPUs) kd_take_held_gpus reserves nothing and the local driver
-- calls kd_reserve_gpus, under the lock.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION kd_take_held_gpus(p_order TEXT, p_model TEXT, p_gpus INT) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    UPDATE capacity_holds SET state = 'consumed', updated_at = now()
    WHERE order_ref = p_order AND state = 'held' AND gpu_model = p_model AND gpus >= p_gpus
      AND id IN (SELECT l.id FROM live_capacity_holds l WHERE l.order_ref = p_order);
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO gpu_reservations (order_ref, gpu_model, gpus, state) VALUES (p_order, p_model, p_gpus, 'reserved')
    ON CONFLICT (order_ref) DO UPDATE SET state = 'reserved', gpus = EXCLUDED.gpus,
        gpu_model = EXCLUDED.gpu_model, released_at = NULL;
    RETURN true;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION IF EXISTS kd_take_held_gpus(TEXT, TEXT, INT);
