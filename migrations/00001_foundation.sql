-- +goose Up
-- +goose StatementBegin

CREATE TABLE accounts (
    id             BIGSERIAL PRIMARY KEY,
    first_name     TEXT NOT NULL CHECK (length(first_name) BETWEEN 1 AND 100),
    last_name      TEXT NOT NULL CHECK (length(last_name) BETWEEN 1 AND 100),
    email          TEXT NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    password_hash  TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Emails compare case-insensitively.
CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email));

CREATE TABLE sessions (
    token_hash   BYTEA PRIMARY KEY,
    account_id   BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    csrf_token   TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_account_idx ON sessions (account_id);

-- Failed logins, for throttling across API replicas.
CREATE TABLE login_failures (
    id         BIGSERIAL PRIMARY KEY,
    email      TEXT NOT NULL,
    ip         TEXT NOT NULL,
    at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_email_idx ON login_failures (lower(email), at);
CREATE INDEX login_failures_ip_idx ON login_failures (ip, at);

-- Catalog: operator data, seeded below, editable.
CREATE TABLE gpu_models (
    model         TEXT PRIMARY KEY CHECK (model ~ '^[a-z0-9-]+$'),
    display_name  TEXT NOT NULL,
    vendor        TEXT NOT NULL CHECK (vendor IN ('nvidia', 'amd')),
    memory_gb     INT NOT NULL CHECK (memory_gb > 0),
    gpus_per_lot  INT NOT NULL CHECK (gpus_per_lot BETWEEN 1 AND 8),
    enabled       BOOLEAN NOT NULL DEFAULT true,
    sort_order    INT NOT NULL DEFAULT 0
);

CREATE TABLE gpu_prices (
    model          TEXT NOT NULL REFERENCES gpu_models(model) ON UPDATE CASCADE,
    duration_days  INT NOT NULL CHECK (duration_days IN (3, 7, 30)),
    lot_cents      BIGINT NOT NULL CHECK (lot_cents > 0),
    PRIMARY KEY (model, duration_days)
);

CREATE TABLE orders (
    ref                  TEXT PRIMARY KEY,
    account_id           BIGINT NOT NULL REFERENCES accounts(id),
    gpu_model            TEXT NOT NULL REFERENCES gpu_models(model) ON UPDATE CASCADE,
    lots                 INT NOT NULL CHECK (lots BETWEEN 1 AND 10),
    gpus_per_lot         INT NOT NULL CHECK (gpus_per_lot >= 1),
    total_gpus           INT NOT NULL CHECK (total_gpus = lots * gpus_per_lot),
    duration_days        INT NOT NULL CHECK (duration_days IN (3, 7, 30)),
    preset               TEXT NOT NULL CHECK (preset IN ('python', 'pytorch', 'notebook', 'inference')),
    lot_cents            BIGINT NOT NULL CHECK (lot_cents > 0),
    total_cents          BIGINT NOT NULL CHECK (total_cents = lot_cents * lots),
    status               TEXT NOT NULL CHECK (status IN ('awaiting_payment', 'payment_detected', 'paid',
                             'provisioning', 'provisioning_failed', 'active', 'ending', 'ended',
                             'cancelled', 'expired', 'refunded')),
    payment_method       TEXT,
    paid_cents           BIGINT NOT NULL DEFAULT 0 CHECK (paid_cents >= 0),
    refunded_cents       BIGINT NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0),
    paid_at              TIMESTAMPTZ,
    period_start         TIMESTAMPTZ,
    period_end           TIMESTAMPTZ CHECK (period_end IS NULL OR period_end > period_start),
    ended_at             TIMESTAMPTZ,
    workflow_id          TEXT NOT NULL UNIQUE,
    workflow_started_at  TIMESTAMPTZ,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX orders_account_idx ON orders (account_id, created_at DESC);
CREATE INDEX orders_unstarted_idx ON orders (created_at) WHERE workflow_started_at IS NULL;

CREATE TABLE topups (
    ref                  TEXT PRIMARY KEY,
    account_id           BIGINT NOT NULL REFERENCES accounts(id),
    amount_cents         BIGINT NOT NULL CHECK (amount_cents IN (10000, 50000, 200000, 1000000)),
    status               TEXT NOT NULL CHECK (status IN ('awaiting_payment', 'payment_detected', 'credited',
                             'expired', 'cancelled')),
    credited_at          TIMESTAMPTZ,
    workflow_id          TEXT NOT NULL UNIQUE,
    workflow_started_at  TIMESTAMPTZ,
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX topups_account_idx ON topups (account_id, created_at DESC);
CREATE INDEX topups_unstarted_idx ON topups (created_at) WHERE workflow_started_at IS NULL;

-- Timeline of an order or a top-up. idem_key makes every write from a
-- workflow activity idempotent.
CREATE TABLE timeline_events (
    id        BIGSERIAL PRIMARY KEY,
    ref       TEXT NOT NULL,
    idem_key  TEXT NOT NULL,
    kind      TEXT NOT NULL,
    message   TEXT NOT NULL,
    data      JSONB,
    at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (ref, idem_key)
);
CREATE INDEX timeline_events_ref_idx ON timeline_events (ref, id);

-- Live tracking: wake SSE listeners on every new event.
CREATE FUNCTION timeline_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('timeline', NEW.ref);
    RETURN NEW;
END $$;
CREATE TRIGGER timeline_events_notify AFTER INSERT ON timeline_events
    FOR EACH ROW EXECUTE FUNCTION timeline_notify();

-- Balance ledger: append-only double entry. A transaction's entries sum to
-- zero; an entry is never updated or deleted.
CREATE TABLE ledger_transactions (
    id               BIGSERIAL PRIMARY KEY,
    idempotency_key  TEXT NOT NULL UNIQUE,
    kind             TEXT NOT NULL CHECK (kind IN ('topup', 'order_payment', 'refund')),
    ref              TEXT,
    memo             TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE ledger_entries (
    id              BIGSERIAL PRIMARY KEY,
    transaction_id  BIGINT NOT NULL REFERENCES ledger_transactions(id),
    -- 'customer:<account id>' (liability: what we owe the customer),
    -- 'crypto_receipts', 'revenue', 'refunds'.
    ledger_account  TEXT NOT NULL CHECK (ledger_account ~ '^(customer:[0-9]+|crypto_receipts|revenue|refunds)$'),
    amount_cents    BIGINT NOT NULL CHECK (amount_cents <> 0),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_account_idx ON ledger_entries (ledger_account);

CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME;
END $$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transactions_append_only BEFORE UPDATE OR DELETE ON ledger_transactions
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transactions_no_truncate BEFORE TRUNCATE ON ledger_transactions
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- Checked at commit: each transaction balances, and no customer account
-- goes below zero.
CREATE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s BIGINT;
BEGIN
    SELECT COALESCE(SUM(amount_cents), 0) INTO s FROM ledger_entries WHERE transaction_id = NEW.transaction_id;
    IF s <> 0 THEN
        RAISE EXCEPTION 'ledger transaction % does not balance (sum %)', NEW.transaction_id, s;
    END IF;
    IF NEW.ledger_account LIKE 'customer:%' THEN
        SELECT COALESCE(SUM(amount_cents), 0) INTO s FROM ledger_entries WHERE ledger_account = NEW.ledger_account;
        IF s < 0 THEN
            RAISE EXCEPTION 'ledger account % would be negative (%)', NEW.ledger_account, s;
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER ledger_entries_balanced AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_balanced();

-- Support agents' actions: who, what, why, when, and the outcome.
CREATE TABLE support_actions (
    id          BIGSERIAL PRIMARY KEY,
    agent       TEXT NOT NULL CHECK (length(agent) > 0),
    action      TEXT NOT NULL CHECK (action IN ('attribute_payment', 'extend', 'end_early',
                    'retry_provisioning', 'cancel', 'refund')),
    target_ref  TEXT NOT NULL,
    reason      TEXT NOT NULL CHECK (length(reason) BETWEEN 3 AND 2000),
    params      JSONB NOT NULL DEFAULT '{}',
    outcome     TEXT CHECK (outcome IN ('done', 'rejected', 'failed')),
    detail      TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    done_at     TIMESTAMPTZ
);
CREATE INDEX support_actions_target_idx ON support_actions (target_ref, id);

-- The audit trail is append-only, except that the outcome is written once.
CREATE FUNCTION support_actions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'support_actions is append-only';
    END IF;
    IF OLD.outcome IS NOT NULL
       OR NEW.id <> OLD.id OR NEW.agent <> OLD.agent OR NEW.action <> OLD.action
       OR NEW.target_ref <> OLD.target_ref OR NEW.reason <> OLD.reason
       OR NEW.params <> OLD.params OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'support_actions: only a missing outcome may be written';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER support_actions_guard BEFORE UPDATE OR DELETE ON support_actions
    FOR EACH ROW EXECUTE FUNCTION support_actions_guard();

CREATE TABLE support_requests (
    id              BIGSERIAL PRIMARY KEY,
    order_ref       TEXT NOT NULL REFERENCES orders(ref),
    account_id      BIGINT NOT NULL REFERENCES accounts(id),
    message         TEXT NOT NULL CHECK (length(message) BETWEEN 1 AND 10000),
    launch_command  TEXT NOT NULL DEFAULT '' CHECK (length(launch_command) <= 4000),
    versions        TEXT NOT NULL DEFAULT '' CHECK (length(versions) <= 4000),
    first_error     TEXT NOT NULL DEFAULT '' CHECK (length(first_error) <= 20000),
    status          TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'answered', 'closed')),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX support_requests_order_idx ON support_requests (order_ref, id);

-- Local provisioning driver (provision/localpg): capacity per GPU model,
-- reservations and generated access. A real host driver replaces it.
CREATE TABLE gpu_inventory (
    gpu_model   TEXT PRIMARY KEY REFERENCES gpu_models(model) ON UPDATE CASCADE,
    total_gpus  INT NOT NULL CHECK (total_gpus >= 0)
);

CREATE TABLE gpu_reservations (
    order_ref    TEXT PRIMARY KEY REFERENCES orders(ref),
    gpu_model    TEXT NOT NULL REFERENCES gpu_models(model) ON UPDATE CASCADE,
    gpus         INT NOT NULL CHECK (gpus > 0),
    state        TEXT NOT NULL CHECK (state IN ('reserved', 'prepared', 'verified', 'released')),
    preset       TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    released_at  TIMESTAMPTZ
);

CREATE TABLE order_access (
    order_ref       TEXT PRIMARY KEY REFERENCES orders(ref),
    host            TEXT NOT NULL,
    port            INT NOT NULL CHECK (port BETWEEN 1 AND 65535),
    username        TEXT NOT NULL,
    password        TEXT NOT NULL,
    gpu_model_seen  TEXT NOT NULL,
    gpu_count_seen  INT NOT NULL,
    driver_version  TEXT NOT NULL,
    cuda_version    TEXT NOT NULL,
    notes           TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at      TIMESTAMPTZ
);

-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE IF EXISTS order_access, gpu_reservations, gpu_inventory, support_requests, support_actions,
    ledger_entries, ledger_transactions, timeline_events, topups, orders, gpu_prices, gpu_models,
    login_failures, sessions, accounts CASCADE;
DROP FUNCTION IF EXISTS timeline_notify, ledger_append_only, ledger_check_balanced, support_actions_guard;
-- +goose StatementEnd
