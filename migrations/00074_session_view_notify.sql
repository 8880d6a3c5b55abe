-- A session's account is cached in each API process with the order views
-- (postgres/session_cache.go): a changed or deleted session (sign-out,
-- sessions ended from another, a password change) announces its token's
-- hash on the 'session_view' channel, and any change of an account '*'
-- (every session; accounts change rarely). A session's end and idle end are
-- read with it and kept in the cache's deadline. TestOrderViewTablesNotify
-- holds this list to the session's statement.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION session_view_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        PERFORM pg_notify('session_view', encode(OLD.token_hash, 'hex'));
    ELSE
        PERFORM pg_notify('session_view', '*');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER sessions_session_view AFTER UPDATE OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION session_view_notify();
CREATE TRIGGER accounts_session_view AFTER UPDATE OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION session_view_notify();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER accounts_session_view ON accounts;
DROP TRIGGER sessions_session_view ON sessions;
DROP FUNCTION session_view_notify();
-- +goose StatementEnd
