package domain

import "time"

// AgentSession is a support agent's session of the browser console, opened
// with the agent's token (KERNODECK_SUPPORT_TOKENS). The store keeps the
// SHA-256 of its token, never the token, and a fingerprint of the agent
// token it was opened with: the session holds only while that token is
// still configured for the agent.
type AgentSession struct {
	Agent      string    `json:"agent" db:"agent"`
	TokenFP    []byte    `json:"-" db:"token_fp"`
	CSRFToken  string    `json:"csrf_token" db:"csrf_token"`
	ClientIP   string    `json:"client_ip" db:"client_ip"`
	UserAgent  string    `json:"user_agent" db:"user_agent"`
	CreatedAt  time.Time `json:"created_at" db:"created_at"`
	LastUsedAt time.Time `json:"last_used_at" db:"last_used_at"`
	ExpiresAt  time.Time `json:"expires_at" db:"expires_at"`
}
