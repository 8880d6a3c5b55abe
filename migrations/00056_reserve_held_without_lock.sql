-- A paid order's reservation takes its own hold without the model's
-- capacity lock (issue 23): in a block paying thousands of orders of one
-- model, every reservation waited for that one lock, ~1 s each on 2 cores.
-- The swap is safe unlocked: the hold already takes its GPUs off what any
-- other decision counts (kd_free_gpus reads holds and reservations in one
-- snapshot, so it sees the hold or the reservation, never neither, never
-- both), and a hold that still counts (live_capacity_holds) is never given
-- back by kd_lock_capacity. Both touch the hold's row: whichever comes
-- second sees the other's state. Without such a hold (none, lapsed, or for
-- fewer GPUs), as before, under the lock.
-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kd_reserve_gpus(p_order TEXT, p_model TEXT, p_gpus INT, OUT outcome TEXT, OUT free INT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    free := 0;
    PERFORM 1 FROM gpu_inventory WHERE gpu_model = p_model;
    IF NOT FOUND THEN
        outcome := 'no_inventory';
        RETURN;
    END IF;
    UPDATE capacity_holds SET state = 'consumed', updated_at = now()
    WHERE order_ref = p_order AND state = 'held' AND gpu_model = p_model AND gpus >= p_gpus
      AND id IN (SELECT l.id FROM live_capacity_holds l WHERE l.order_ref = p_order);
    IF NOT FOUND THEN
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
    END IF;
    INSERT INTO gpu_reservations (order_ref, gpu_model, gpus, state) VALUES (p_order, p_model, p_gpus, 'reserved')
    ON CONFLICT (order_ref) DO UPDATE SET state = 'reserved', gpus = EXCLUDED.gpus,
        gpu_model = EXCLUDED.gpu_model, released_at = NULL;
    outcome := 'reserved';
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kd_reserve_gpus(p_order TEXT, p_model TEXT, p_gpus INT, OUT outcome TEXT, OUT free INT)
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
