-- The rates the shop observed (issue 36, item 3): every rate fetched
-- through the application's rate source (a quote) and, every
-- KERNODECK_RATE_SAMPLE_INTERVAL, every priced asset sampled by the worker.
-- Support's value of a payment received in another asset is bounded by the
-- observation nearest to the payment's reception (postgres.ValueBound).
-- Append-only history; usd_per_unit is USD per whole unit (1 BTC, 1 USDT).
-- +goose Up
-- +goose StatementBegin
CREATE TABLE asset_rates (
    id           BIGSERIAL PRIMARY KEY,
    asset        TEXT NOT NULL CHECK (asset ~ '^[A-Z0-9]{1,16}$'),
    usd_per_unit NUMERIC NOT NULL CHECK (usd_per_unit > 0),
    source       TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 64),
    observed_at  TIMESTAMPTZ NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX asset_rates_asset_observed_idx ON asset_rates (asset, observed_at);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE asset_rates;
-- +goose StatementEnd
