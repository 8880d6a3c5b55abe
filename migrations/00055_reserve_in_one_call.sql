-- Capacity decisions run server-side (issue 23): a reservation of the local
-- driver is one call, so the model's capacity lock is held for that call's
-- statements only, never across round trips; holds and reservations share
-- the same lock and the same arithmetic through these functions.
-- +goose Up
-- +goose StatementBegin
-- The model's active reservations, summed by every capacity decision
-- (without it the sum reads every reservation ever made).
CREATE INDEX gpu_reservations_model_active ON gpu_reservations (gpu_model) WHERE state <> 'released';

-- kd_lock_capacity serialises every decision about a model's capacity
-- (holds and reservations) until the end of the transaction, then gives
-- back for good the model's holds that no longer count (window over, order
-- unpaid): a lapsed hold must not count again when its order is paid late.
-- VOLATILE: each statement after the lock takes a new snapshot, so it sees
-- what the previous holder of the lock committed.
CREATE FUNCTION kd_lock_capacity(p_model TEXT) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('kd-capacity:' || p_model));
    UPDATE capacity_holds SET state = 'released', updated_at = now()
    WHERE gpu_model = p_model AND state = 'held'
      AND id NOT IN (SELECT l.id FROM live_capacity_holds l WHERE l.gpu_model = p_model);
END $$;

-- kd_free_gpus counts the local driver's free GPUs of a model for an order:
-- inventory minus active reservations minus other orders' live holds.
CREATE FUNCTION kd_free_gpus(p_model TEXT, p_order TEXT) RETURNS int LANGUAGE sql STABLE AS $$
SELECT (COALESCE((SELECT total_gpus FROM gpu_inventory WHERE gpu_model = p_model), 0)
    - COALESCE((SELECT SUM(gpus) FROM gpu_reservations WHERE gpu_model = p_model AND state <> 'released'), 0)
    - COALESCE((SELECT SUM(gpus) FROM live_capacity_holds WHERE gpu_model = p_model AND order_ref <> p_order), 0))::int
$$;

-- kd_reserve_gpus is the local driver's reservation: under the capacity
-- lock, a no-op ('already') when the order's reservation is active, else
-- 'no_capacity' (with the GPUs free) or the order's hold consumed and its
-- reservation made ('reserved'); 'no_inventory' for an unknown model.
CREATE FUNCTION kd_reserve_gpus(p_order TEXT, p_model TEXT, p_gpus INT, OUT outcome TEXT, OUT free INT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    free := 0;
    PERFORM 1 FROM gpu_inventory WHERE gpu_model = p_model;
    IF NOT FOUND THEN
        outcome := 'no_inventory';
        RETURN;
    END IF;
    PERFORM kd_lock_capacity(p_model);
    PERFORM 1 FROM gpu_reservations WHERE order_ref = p_order AND state <> 'released';
    IF FOUND THEN
        outcome := 'already';
        RETURN;
    END IF;
    free := kd_free_gpus(p_model, p_order);
    IF free < p_gpus THEN
        outcome := 'no_capacity';
        RETURN;
    END IF;
    UPDATE capacity_holds SET state = 'consumed', updated_at = now() WHERE order_ref = p_order AND state = 'held';
    INSERT INTO gpu_reservations (order_ref, gpu_model, gpus, state) VALUES (p_order, p_model, p_gpus, 'reserved')
    ON CONFLICT (order_ref) DO UPDATE SET state = 'reserved', gpus = EXCLUDED.gpus,
        gpu_model = EXCLUDED.gpu_model, released_at = NULL;
    outcome := 'reserved';
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP FUNCTION IF EXISTS kd_reserve_gpus(TEXT, TEXT, INT);
DROP FUNCTION IF EXISTS kd_free_gpus(TEXT, TEXT);
DROP FUNCTION IF EXISTS kd_lock_capacity(TEXT);
DROP INDEX IF EXISTS gpu_reservations_model_active;
-- +goose StatementEnd
