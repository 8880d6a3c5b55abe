package domain

import (
	"testing"
	"time"
)

// TestClientNetworkCountsIPv6PerSlash56: every per-network limit counts an
// IPv6 client by its /56 (the 256 /64s of one subscriber are one network),
// an IPv4 client by its address (mapped forms alike).
func TestClientNetworkCountsIPv6PerSlash56(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"2001:db8:1:2::1", "2001:db8:1::/56"},
		{"2001:db8:1:ff:ffff::9", "2001:db8:1::/56"}, // another /64 of the same /56
		{"2001:db8:1:100::1", "2001:db8:1:100::/56"}, // the next /56
		{"not an address", "not an address"},
	} {
		if got := ClientNetwork(c.ip); got != c.want {
			t.Errorf("ClientNetwork(%q) = %q, want %q", c.ip, got, c.want)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	for _, l := range []Limit{{Quota: "q", Max: 0}, {Quota: "q", Max: 3, Window: time.Hour}} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	for _, l := range []Limit{{Max: 1, Window: time.Hour}, {Quota: "q", Max: -1}, {Quota: "q", Max: 2}} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}

func TestQuotaExceededWaitsAtLeastASecond(t *testing.T) {
	e := QuotaExceeded(QuotaClaims, 0, "Déjà signalé.")
	if e.RetryAfter != time.Second || ErrorCode(e) != ECodeQuota || ErrorMessage(e) != "Déjà signalé." {
		t.Fatalf("%+v", e)
	}
}
