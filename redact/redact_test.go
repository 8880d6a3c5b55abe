package redact_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/chainwatch/evm"
	"github.com/kernodeck/kernodeck/chainwatch/tron"
	"github.com/kernodeck/kernodeck/redact"
)

func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef":  "https://mainnet.infura.io/v3/REDACTED",
		"https://eth-mainnet.g.alchemy.com/v2/Ab3dEfGhIjKlMnOpQr5t":      "https://eth-mainnet.g.alchemy.com/v2/REDACTED",
		"http://rpcuser:rpcpass@127.0.0.1:8332":                          "http://REDACTED@127.0.0.1:8332",
		"https://api.trongrid.io/wallet?apikey=secret-key-1234":          "https://api.trongrid.io/wallet?apikey=REDACTED",
		"https://api.mainnet-beta.solana.com/wallet/getnowblock":         "https://api.mainnet-beta.solana.com/wallet/getnowblock",
		"postgres://kd:hunter2hunter2@db:5432/kernodeck?sslmode=disable": "postgres://REDACTED@db:5432/kernodeck?sslmode=REDACTED",
	} {
		if got := redact.URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// closedPort is a loopback port nobody listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestNodeErrorsLoggedWithoutCredentials: the errors of the real Tron and
// Ethereum clients against an unreachable node quote its URL; logged
// through the redacting writer (as every kernodeck command logs), the API
// key, user and password are gone and the host stays.
func TestNodeErrorsLoggedWithoutCredentials(t *testing.T) {
	const key, user, pass = "0123456789abcdef0123456789abcdef", "rpcuser-kd", "s3cret-pass"
	addr := closedPort(t)
	tronURL := "http://" + user + ":" + pass + "@" + addr + "/" + key + "?apikey=qwerty-api-key"
	ethURL := "http://" + addr + "/v3/" + key
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(redact.New([]string{tronURL, ethURL}).Writer(&buf), nil))

	ctx := context.Background()
	tc, err := tron.New(tron.Config{URL: tronURL})
	if err != nil {
		t.Fatal(err)
	}
	_, tronErr := tc.Tip(ctx)
	if tronErr == nil {
		t.Fatal("tron: no error from a closed port")
	}
	logger.Error("chain watcher step failed", "network", "tron", "err", tronErr)
	ec, err := evm.New(ctx, evm.Config{RPCURL: ethURL, ChainID: 1})
	if err == nil {
		_, err = ec.Tip(ctx)
		ec.Close()
	}
	if err == nil {
		t.Fatal("evm: no error from a closed port")
	}
	logger.Error("chain watcher step failed", "network", "ethereum", "err", err)

	out := buf.String()
	// Without redaction the key would be there: the clients quote the URL.
	if !strings.Contains(tronErr.Error(), key) || !strings.Contains(err.Error(), key) {
		t.Fatalf("the clients' errors do not quote the key: the test proves nothing: %v / %v", tronErr, err)
	}
	for _, secret := range []string{key, user, pass, "qwerty-api-key"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log holds %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, addr) || !strings.Contains(out, redact.Mask) {
		t.Fatalf("log lost the host or shows no mask:\n%s", out)
	}
}
