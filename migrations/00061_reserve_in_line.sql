-- A reservation without a hold serves the paid line first (issue 35): the
-- local driver's kd_reserve_gpus takes GPUs only when those free are still
-- enough once the paid orders waiting ahead of the order
-- (kd_waiting_ahead, migration 00059) are counted, and never for an order
-- already closed (refunded from the line, cancelled): the order's row is
-- read FOR SHARE, so a reservation and the refund that closes the order
-- are decided one after the other.
-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kd_reserve_gpus(p_order TEXT, p_model TEXT, p_gpus INT, OUT outcome TEXT, OUT free INT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    st TEXT;
BEGIN
    free := 0;
    PERFORM 1 FROM gpu_inventory WHERE gpu_model = p_model;
    IF NOT FOUND THEN
        outcome := 'no_inventory';
        RETURN;
    END IF;
    SELECT status INTO st FROM orders WHERE ref = p_order FOR SHARE;
    IF st IN ('cancelled', 'expired', 'refunded', 'ending', 'ended') THEN
        outcome := 'closed';
        RETURN;
    END IF;
    PERFORM kd_lock_capacity(p_model);
    PERFORM 1 FROM gpu_reservations WHERE order_ref = p_order AND state <> 'released';
    IF FOUND THEN
        outcome := 'already';
        RETURN;
    END IF;
    free := kd_free_gpus(p_model, p_order) - kd_waiting_ahead(p_model, 0, p_order);
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
