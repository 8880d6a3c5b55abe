package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// liveAgentSession is the condition of an agent session still valid.
const liveAgentSession = `s.expires_at > now() AND s.last_used_at + s.idle_timeout > now()`

// CreateAgentSession stores a support console session under the SHA-256
// hash of its token, with its CSRF token, expiry and idle timeout. The
// agent's expired sessions are removed on the way.
func (db *DB) CreateAgentSession(ctx context.Context, tokenHash []byte, s domain.AgentSession, idle time.Duration) error {
	if idle <= 0 || idle > time.Until(s.ExpiresAt) {
		idle = max(time.Until(s.ExpiresAt), time.Second)
	}
	if _, err := db.ExecContext(ctx,
		`DELETE FROM agent_sessions s WHERE agent = $1 AND NOT (`+liveAgentSession+`)`, s.Agent); err != nil {
		return fmt.Errorf("delete expired agent sessions: %w", err)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO agent_sessions (token_hash, agent, token_fp, csrf_token, client_ip, user_agent, expires_at, idle_timeout)
		VALUES ($1, $2, $3, $4, $5, $6, $7, make_interval(secs => $8))`,
		tokenHash, s.Agent, s.TokenFP, s.CSRFToken, s.ClientIP, s.UserAgent, s.ExpiresAt, idle.Seconds()); err != nil {
		return fmt.Errorf("create agent session: %w", err)
	}
	return nil
}

// AgentSession returns a valid agent session (unexpired, used within its
// idle timeout) and records its use (at most every SessionTouchEvery), or
// ErrNotFound.
func (db *DB) AgentSession(ctx context.Context, tokenHash []byte) (domain.AgentSession, error) {
	var s domain.AgentSession
	err := db.GetContext(ctx, &s, fmt.Sprintf(`
		WITH touch AS (
			UPDATE agent_sessions s SET last_used_at = now()
			WHERE s.token_hash = $1 AND %[1]s AND s.last_used_at < now() - interval '%[2]d seconds')
		SELECT agent, token_fp, csrf_token, client_ip, user_agent, created_at, last_used_at, expires_at
		FROM agent_sessions s WHERE s.token_hash = $1 AND %[1]s`,
		liveAgentSession, int(SessionTouchEvery.Seconds())), tokenHash)
	if err != nil {
		return domain.AgentSession{}, fmt.Errorf("agent session: %w", notFound(err))
	}
	return s, nil
}

// PeekAgentSession is AgentSession without recording a use: a live stream
// reconnecting by itself is not the agent at work, and must not keep an
// idle session open.
func (db *DB) PeekAgentSession(ctx context.Context, tokenHash []byte) (domain.AgentSession, error) {
	var s domain.AgentSession
	if err := db.GetContext(ctx, &s, `SELECT agent, token_fp, csrf_token, client_ip, user_agent, created_at, last_used_at, expires_at
		FROM agent_sessions s WHERE s.token_hash = $1 AND `+liveAgentSession, tokenHash); err != nil {
		return domain.AgentSession{}, fmt.Errorf("agent session: %w", notFound(err))
	}
	return s, nil
}

// DeleteAgentSession removes an agent session (sign-out); an absent one is
// not an error.
func (db *DB) DeleteAgentSession(ctx context.Context, tokenHash []byte) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM agent_sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("delete agent session: %w", err)
	}
	return nil
}

// DeleteAgentSessions removes every session of an agent (all its
// browsers); it returns how many there were.
func (db *DB) DeleteAgentSessions(ctx context.Context, agent string) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM agent_sessions WHERE agent = $1`, agent)
	if err != nil {
		return 0, fmt.Errorf("delete agent sessions: %w", err)
	}
	return res.RowsAffected()
}
