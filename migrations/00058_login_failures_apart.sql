-- An account's failed logins are kept apart from its activity (issue 36,
-- item 7): counted per client network (an IPv4 address, an IPv6 /56) and
-- day (UTC), so that failures from many networks can neither push its
-- logins and password changes out of the activity (trimmed among
-- themselves) nor grow without bound.
-- +goose Up
-- +goose StatementBegin
CREATE TABLE account_login_failures (
    account_id  BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    day         DATE NOT NULL,
    network     TEXT NOT NULL CHECK (length(network) <= 64),
    failures    INT NOT NULL CHECK (failures > 0),
    first_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The last failure's client.
    user_agent  TEXT NOT NULL DEFAULT '' CHECK (length(user_agent) <= 512),
    PRIMARY KEY (account_id, day, network)
);
CREATE INDEX account_login_failures_last_idx ON account_login_failures (account_id, last_at DESC);

INSERT INTO account_login_failures (account_id, day, network, failures, first_at, last_at, user_agent)
SELECT account_id, day, network, count(*), min(at), max(at), (array_agg(user_agent ORDER BY id DESC))[1]
FROM (SELECT account_id, id, at, user_agent, (at AT TIME ZONE 'UTC')::date AS day,
        CASE WHEN client_ip ~ '^[0-9a-fA-F:]+$' AND client_ip LIKE '%:%'
            THEN network(set_masklen(client_ip::inet, 56))::text ELSE client_ip END AS network
    FROM account_activity WHERE kind = 'login_failed') f
GROUP BY account_id, day, network;
DELETE FROM account_activity WHERE kind = 'login_failed';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
INSERT INTO account_activity (account_id, kind, user_agent, client_ip, at)
SELECT account_id, 'login_failed', user_agent, network, last_at FROM account_login_failures;
DROP TABLE IF EXISTS account_login_failures;
-- +goose StatementEnd
