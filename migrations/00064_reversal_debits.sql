-- +goose Up
-- +goose StatementBegin
-- Money paid out to a balance on the strength of a payment the chain then
-- removed (a flag's or a dust row's shortfall) is taken back from that
-- balance: debited_cents is how much of the row's shortfall the ledger
-- has taken back ('reversal' transactions, customer -> reversals; back
-- again when the payment is mined again). Only a reversal may take a
-- customer's account below zero: that is a debt, which the next credits
-- cover first; a credit never fails on it.
ALTER TABLE payment_exceptions ADD COLUMN debited_cents BIGINT NOT NULL DEFAULT 0 CHECK (debited_cents >= 0);
ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_kind_check,
    ADD CONSTRAINT ledger_transactions_kind_check CHECK (kind IN ('topup', 'order_payment', 'refund', 'reversal'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_ledger_account_check,
    ADD CONSTRAINT ledger_entries_ledger_account_check
        CHECK (ledger_account ~ '^(customer:[0-9]+|crypto_receipts|revenue|refunds|reversals)$');
CREATE OR REPLACE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s BIGINT;
BEGIN
    SELECT COALESCE(SUM(amount_cents), 0) INTO s FROM ledger_entries WHERE transaction_id = NEW.transaction_id;
    IF s <> 0 THEN
        RAISE EXCEPTION 'ledger transaction % does not balance (sum %)', NEW.transaction_id, s;
    END IF;
    IF NEW.ledger_account LIKE 'customer:%' AND NEW.amount_cents < 0
       AND (SELECT kind FROM ledger_transactions WHERE id = NEW.transaction_id) <> 'reversal' THEN
        SELECT COALESCE(SUM(amount_cents), 0) INTO s FROM ledger_entries WHERE ledger_account = NEW.ledger_account;
        IF s < 0 THEN
            RAISE EXCEPTION 'ledger account % would be negative (%)', NEW.ledger_account, s;
        END IF;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
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
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_ledger_account_check,
    ADD CONSTRAINT ledger_entries_ledger_account_check
        CHECK (ledger_account ~ '^(customer:[0-9]+|crypto_receipts|revenue|refunds)$');
ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_kind_check,
    ADD CONSTRAINT ledger_transactions_kind_check CHECK (kind IN ('topup', 'order_payment', 'refund'));
ALTER TABLE payment_exceptions DROP COLUMN debited_cents;
-- +goose StatementEnd
