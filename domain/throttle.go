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
	Key        string // scope and value, e.g. "login:ip:2001:db8::/56"; hashed before storage
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

// ClientNetwork is the network every per-network limit counts under: an
// IPv4 address as is, an IPv6 address by its /56. Counting each address
// apart would give an attacker 2^64 fresh counters per /64, and one
// subscriber commonly gets a /56 (256 networks of /64), so even the /64
// would multiply every limit by 256.
func ClientNetwork(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(ClientNetworkBitsV6)
	return p.String()
}

// ClientNetworkBitsV6 is the IPv6 prefix length of a client network.
const ClientNetworkBitsV6 = 56

// AgentGuessRule throttles support agent token guesses from one network:
// 10 wrong tokens within 15 minutes lock it for 15 minutes, doubled at each
// further lock (at most a day). Shared by the support API and the codec
// endpoint, so guesses on either count together.
func AgentGuessRule(network string) ThrottleRule {
	return ThrottleRule{Key: "agent:net:" + network, Limit: 10, Window: 15 * time.Minute,
		Lockout: 15 * time.Minute, MaxLockout: 24 * time.Hour}
}
