-- GPU host inventory for the SSH provisioning driver (provision/sshhost),
-- encrypted access secrets, the order-time SSH public key, and the mail
-- outbox written in the same transaction as the state change it announces.
-- +goose Up
-- +goose StatementBegin

-- How nvidia-smi names each catalog model, so the driver can check what a
-- host really carries (operator data, like the catalog). NULL: the model
-- cannot be verified with nvidia-smi (AMD) and the SSH driver refuses it.
ALTER TABLE gpu_models ADD COLUMN smi_name_pattern TEXT;
UPDATE gpu_models SET smi_name_pattern = CASE model
    WHEN 'rtx-a5000' THEN '^(NVIDIA )?RTX A5000$'
    WHEN 'rtx-4090'  THEN '^(NVIDIA )?GeForce RTX 4090$'
    WHEN 'rtx-a6000' THEN '^(NVIDIA )?RTX A6000$'
    WHEN 'l40s'      THEN '^(NVIDIA )?L40S$'
    WHEN 'a100-80g'  THEN '^(NVIDIA )?A100[- ].*80GB'
    WHEN 'h100-80g'  THEN '^(NVIDIA )?H100 (80GB HBM3|PCIe|SXM5 80GB)$'
    WHEN 'b200'      THEN '^(NVIDIA )?B200$'
    ELSE NULL END;

-- One row per machine. An order takes one whole host whose GPU model and
-- count are exactly the order's: the customer gets every GPU of the machine
-- and verification can compare the count nvidia-smi shows with the order.
CREATE TABLE gpu_hosts (
    id                    BIGSERIAL PRIMARY KEY,
    name                  TEXT NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9.-]{0,62}$'),
    address               TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 253),
    ssh_port              INT NOT NULL DEFAULT 22 CHECK (ssh_port BETWEEN 1 AND 65535),
    -- SHA256 fingerprint of the host key (ssh-keygen -lf), as "SHA256:...".
    host_key_fingerprint  TEXT NOT NULL CHECK (host_key_fingerprint ~ '^SHA256:[A-Za-z0-9+/]{43}$'),
    -- Type of that key ("ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"): the
    -- client asks for exactly this key, so a host offering several types is
    -- checked against the one recorded.
    host_key_type         TEXT NOT NULL DEFAULT 'ssh-ed25519',
    gpu_model             TEXT NOT NULL REFERENCES gpu_models(model) ON UPDATE CASCADE,
    gpu_count             INT NOT NULL CHECK (gpu_count BETWEEN 1 AND 64),
    state                 TEXT NOT NULL DEFAULT 'available'
                          CHECK (state IN ('available', 'reserved', 'in_use', 'draining', 'broken')),
    note                  TEXT NOT NULL DEFAULT '',
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (address, ssh_port)
);
CREATE INDEX gpu_hosts_free_idx ON gpu_hosts (gpu_model, gpu_count) WHERE state = 'available';

-- A host held by an order. At most one active reservation per order and per
-- host: the database itself refuses two orders on one machine, whatever the
-- locking in the driver does.
CREATE TABLE host_reservations (
    id                BIGSERIAL PRIMARY KEY,
    order_ref         TEXT NOT NULL REFERENCES orders(ref),
    host_id           BIGINT REFERENCES gpu_hosts(id) ON DELETE SET NULL,
    host_name         TEXT NOT NULL,
    unix_user         TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('active', 'released', 'failed')),
    -- Secrets generated once in prepare, so a retry installs the same ones
    -- (sealed with the configured keyring, never stored in clear).
    private_key       TEXT,
    public_key        TEXT,
    jupyter_token     TEXT,
    prepared_at       TIMESTAMPTZ,
    gpu_model_seen    TEXT,
    gpu_count_seen    INT,
    driver_version    TEXT,
    cuda_version      TEXT,
    failure           TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    released_at       TIMESTAMPTZ
);
CREATE UNIQUE INDEX host_reservations_order_active ON host_reservations (order_ref) WHERE state = 'active';
CREATE UNIQUE INDEX host_reservations_host_active ON host_reservations (host_id) WHERE state = 'active';
CREATE INDEX host_reservations_order_idx ON host_reservations (order_ref, id);

-- The customer's own SSH public key, given at order time (optional).
ALTER TABLE orders ADD COLUMN ssh_public_key TEXT CHECK (ssh_public_key IS NULL OR length(ssh_public_key) <= 16384);

-- Access secrets are sealed (AES-GCM, "kdsec1:<key id>:<base64>"). A
-- password is absent when access is by key. A generated private key is
-- shown once to the owner, then erased (private_key_shown_at).
ALTER TABLE order_access ALTER COLUMN password DROP NOT NULL;
ALTER TABLE order_access
    ADD COLUMN private_key          TEXT,
    ADD COLUMN private_key_shown_at TIMESTAMPTZ,
    ADD COLUMN key_fingerprint      TEXT,
    ADD COLUMN jupyter_url          TEXT,
    ADD COLUMN jupyter_token        TEXT;

-- Transactional outbox of customer emails. A row is inserted in the same
-- transaction as the state change it announces; the dispatcher in the
-- worker claims rows (FOR UPDATE SKIP LOCKED) and sends them over SMTP.
CREATE TABLE mail_outbox (
    id               BIGSERIAL PRIMARY KEY,
    outbox_key       TEXT NOT NULL UNIQUE,
    account_id       BIGINT NOT NULL REFERENCES accounts(id),
    template         TEXT NOT NULL,
    ref              TEXT NOT NULL,
    data             JSONB NOT NULL DEFAULT '{}',
    -- pending -> sending -> sent; sending whose lease ran out (the process
    -- died while talking SMTP) -> unknown, never resent automatically so
    -- that no mail goes out twice; failed after the last attempt.
    state            TEXT NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'unknown')),
    attempts         INT NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until      TIMESTAMPTZ,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at          TIMESTAMPTZ
);
CREATE INDEX mail_outbox_due_idx ON mail_outbox (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX mail_outbox_sending_idx ON mail_outbox (lease_until) WHERE state = 'sending';
CREATE INDEX mail_outbox_ref_idx ON mail_outbox (ref, id);

-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE IF EXISTS mail_outbox, host_reservations, gpu_hosts;
ALTER TABLE order_access DROP COLUMN IF EXISTS private_key, DROP COLUMN IF EXISTS private_key_shown_at,
    DROP COLUMN IF EXISTS key_fingerprint, DROP COLUMN IF EXISTS jupyter_url, DROP COLUMN IF EXISTS jupyter_token;
ALTER TABLE orders DROP COLUMN IF EXISTS ssh_public_key;
ALTER TABLE gpu_models DROP COLUMN IF EXISTS smi_name_pattern;
-- +goose StatementEnd
