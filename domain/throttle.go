package domain

import (
	"fmt"
	"net/netip"
	"time"
)

// ThrottleRule is one counter of failed authentication attempts (a login
// for an email from an address, all logins from an address, token guesses
// from an address, registrations from an address). Past Limit attempts
// within Window, the key is locked for Lockout, doubled at each further lock
// (at most MaxLockout); a day without a lock forgets the doublings.
type ThrottleRule struct {
	Key        string // scope and value, e.g. "login:ip:2001:db8::/64"; hashed before storage
	Limit      int
	Window     time.Duration
	Lockout    time.Duration
	MaxLockout time.Duration
}

// Validate checks the rule is usable.
func (r ThrottleRule) Validate() error {
	if r.Key == "" || r.Limit < 1 || r.Window <= 0 || r.Lockout <= 0 || r.MaxLockout < r.Lockout {
		return fmt.Errorf("throttle rule %q: key, limit >= 1, window and lockout > 0, max lockout >= lockout required", r.Key)
	}
	return nil
}

// LockoutAfter is the lock imposed at the strikes-th lock (0-based).
func (r ThrottleRule) LockoutAfter(strikes int) time.Duration {
	d := r.Lockout
	for range min(strikes, 20) {
		if d >= r.MaxLockout {
			break
		}
		d *= 2
	}
	return min(d, r.MaxLockout)
}

// ClientNetwork is the address throttling counts under: an IPv4 address
// as is, an IPv6 address by its /64 (one subscriber's prefix: counting each
// address apart would give an attacker 2^64 fresh counters).
func ClientNetwork(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(64)
	return p.String()
}

// AgentGuessRule throttles support agent token guesses from one network:
// 10 wrong tokens within 15 minutes lock it for 15 minutes, doubled at each
// further lock (at most a day). Shared by the support API and the codec
// endpoint, so guesses on either count together.
func AgentGuessRule(network string) ThrottleRule {
	return ThrottleRule{Key: "agent:net:" + network, Limit: 10, Window: 15 * time.Minute,
		Lockout: 15 * time.Minute, MaxLockout: 24 * time.Hour}
}
