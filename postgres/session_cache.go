package postgres

import (
	"encoding/hex"
	"time"
)

// SessionChannel is the PostgreSQL NOTIFY channel on which the sessions
// table announces a changed or deleted session (its token's hash, in hex),
// and the accounts table any change of an account (AllViews: every
// session; accounts change rarely) (migration 00074).
const SessionChannel = "session_view"

// sessionCache caches a session's account as its statement read it, until
// the first of the session's end, its idle end and its next touch, so that
// a read of a cached order view needs no statement at all (notified.go:
// while a listener hears session_view). A session signed out, ended from
// another one or whose password changed is deleted, and so forgotten.
type sessionCache = notified[*cachedSession]

// cachedSession is a session's account and when it must be read again, in
// this process's clock: the statement's deadline less the database's time,
// added to when the statement was sent (so a clock that differs from the
// database's shortens the time in cache, never lengthens it).
type cachedSession struct {
	row   sessionAccountRow
	until time.Time
}

func sessionKey(tokenHash []byte) string { return hex.EncodeToString(tokenHash) }
