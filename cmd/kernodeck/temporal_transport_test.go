package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/secrets"
)

// Outside dev, a Temporal frontend off this machine without TLS is refused
// unless allowed; loopback, TLS and dev are fine.
func TestTemporalPlaintextOffThisMachineRefused(t *testing.T) {
	plain := func(addr string) client.Options { return client.Options{HostPort: addr} }
	withTLS := func(addr string) client.Options {
		return client.Options{HostPort: addr, ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{}}}
	}
	tlsDisabled := func(addr string) client.Options {
		o := withTLS(addr)
		o.ConnectionOptions.TLSDisabled = true
		return o
	}
	cases := []struct {
		name       string
		dev, allow bool
		opts       client.Options
		refused    bool
	}{
		{"IPv4 loopback", false, false, plain("127.0.0.1:7233"), false},
		{"another loopback address", false, false, plain("127.0.0.2:7233"), false},
		{"IPv6 loopback", false, false, plain("[::1]:7233"), false},
		{"localhost", false, false, plain("localhost:7233"), false},
		{"localhost, dns scheme", false, false, plain("dns:///localhost:7233"), false},
		{"unix socket", false, false, plain("unix:///run/temporal.sock"), false},
		{"private address", false, false, plain("10.0.0.5:7233"), true},
		{"name", false, false, plain("temporal.internal:7233"), true},
		{"name resolving anywhere, dns scheme", false, false, plain("dns:///temporal.internal:7233"), true},
		{"localhost as a subdomain", false, false, plain("localhost.evil.example:7233"), true},
		{"IPv6 address", false, false, plain("[2001:db8::1]:7233"), true},
		{"all interfaces", false, false, plain("0.0.0.0:7233"), true},
		{"TLS off explicitly", false, false, tlsDisabled("temporal.internal:7233"), true},
		{"TLS", false, false, withTLS("temporal.internal:7233"), false},
		{"allowed", false, true, plain("temporal.internal:7233"), false},
		{"dev", true, false, plain("10.0.0.5:7233"), false},
	}
	for _, c := range cases {
		err := checkTemporalTransport(c.dev, c.allow, c.opts)
		if (err != nil) != c.refused {
			t.Errorf("%s (%s): refused %v, want %v (%v)", c.name, c.opts.HostPort, err != nil, c.refused, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "KERNODECK_TEMPORAL_ALLOW_PLAINTEXT=true") || !strings.Contains(err.Error(), "TEMPORAL_TLS=true")) {
			t.Errorf("%s: the refusal does not say what to set: %v", c.name, err)
		}
	}
}

// The commands with a Temporal client stop at start with that refusal,
// read from the environment as in production (nothing is dialled).
func TestTemporalPlaintextRefusedAtStart(t *testing.T) {
	t.Setenv("KERNODECK_SECRET_KEYS", secrets.Generate("t1"))
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	t.Setenv("TEMPORAL_ADDRESS", "temporal.internal:7233")
	t.Setenv("TEMPORAL_TLS", "")
	t.Setenv("TEMPORAL_API_KEY", "")
	t.Setenv("KERNODECK_TEMPORAL_ALLOW_PLAINTEXT", "")
	for _, command := range []string{"api", "worker", "chainwatch"} {
		var stderr bytes.Buffer
		if code := run(context.Background(), []string{command}, &bytes.Buffer{}, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), "temporal.internal:7233 is not on this machine and TLS is off") {
			t.Fatalf("%s: exit %d: %s", command, code, stderr.String())
		}
	}
}
