package domain

import "time"

// TwoFactor is an account's second factor (TOTP, RFC 6238) as the store
// keeps it. SecretSealed is the secret sealed with the keyring: only the
// API opens it, to check a code or show it once during setup; it is never
// answered or shown to support.
type TwoFactor struct {
	// Enabled: a first code was confirmed; logins ask for a code.
	Enabled bool
	// Pending: a setup was started and not confirmed (2FA still off).
	Pending      bool
	SecretSealed string `json:"-"`
	// LastStep is the last time step accepted (never accepted again).
	LastStep  int64
	EnabledAt *time.Time
	// RecoveryLeft counts the recovery codes not used yet.
	RecoveryLeft int
}
