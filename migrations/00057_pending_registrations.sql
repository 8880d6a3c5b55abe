-- Unconfirmed addresses cannot be squatted or probed (issue 36, item 6).
--
-- An address belongs to the account that confirmed it: only confirmed
-- accounts are unique per address. A registration always creates an
-- unconfirmed account, whether or not the address is already someone's, so
-- that its answer (a session for a new account) is the same in both cases;
-- an unconfirmed account holds nothing, and can never be confirmed while
-- another account holds the address (the unique index refuses it).
-- +goose Up
DROP INDEX accounts_email_key;
CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email)) WHERE email_verified_at IS NOT NULL;
CREATE INDEX accounts_email_idx ON accounts (lower(email));
-- Registered since, an unconfirmed account cannot sign in with its password
-- (signing in would tell whether the address was someone's); accounts
-- that exist today keep signing in as before.
ALTER TABLE accounts ADD COLUMN signin_unconfirmed BOOLEAN NOT NULL DEFAULT true;

-- +goose Down
-- Fails if an address has a confirmed account and unconfirmed ones:
-- delete the unconfirmed ones first.
ALTER TABLE accounts DROP COLUMN IF EXISTS signin_unconfirmed;
DROP INDEX IF EXISTS accounts_email_idx;
DROP INDEX accounts_email_key;
CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email));
