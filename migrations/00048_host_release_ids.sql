-- What the SSH driver knows of a customer's account on its host, so a
-- release or `kernodeck hosts repair` finds every trace of it even when the
-- host lost its own record (reboot, reinstall): the account's uid (never
-- given twice on a host: the next prepare starts above the highest one
-- recorded) and the subordinate uid/gid ranges it had ("first:count ...").
-- customer_flag says what the customer did to make their host dirty (for
-- support); cleaned_at is when a release or a repair found nothing of the
-- account left (a repair checks every ended reservation of the host
-- without one); gpu_reset is the outcome of the last release's GPU reset.
-- +goose Up
ALTER TABLE host_reservations ADD COLUMN unix_uid BIGINT CHECK (unix_uid >= 0),
    ADD COLUMN sub_ids TEXT NOT NULL DEFAULT '',
    ADD COLUMN customer_flag TEXT,
    ADD COLUMN cleaned_at TIMESTAMPTZ;
CREATE INDEX host_reservations_host_uid_idx ON host_reservations (host_id, unix_uid);
ALTER TABLE gpu_hosts ADD COLUMN gpu_reset TEXT, ADD COLUMN gpu_reset_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE gpu_hosts DROP COLUMN gpu_reset, DROP COLUMN gpu_reset_at;
DROP INDEX host_reservations_host_uid_idx;
ALTER TABLE host_reservations DROP COLUMN unix_uid, DROP COLUMN sub_ids, DROP COLUMN customer_flag, DROP COLUMN cleaned_at;
