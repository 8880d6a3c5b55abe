package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/recovery"
)

// anotherEthereumXpub is m/44'/60'/0' of another wallet (hdkeychain, seed
// "another wallet's seed, 32 bytes!").
const anotherEthereumXpub = "xpub6CfaQZcwqgGM634kdmb7qxEJjt6dhh9iqH5dF8pzrrmcheGgx3qYHWbijaqG5optLPEw4b1Lf5JqundpU5Q4qAJJnXSyqrx3auLEaj8TfUX"

// A process that derives addresses records its key at its first start and
// refuses to start with another one until `kernodeck xpub confirm`.
func TestStartRefusesAChangedXPubUntilConfirmed(t *testing.T) {
	url, db := migratedDB(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("KERNODECK_XPUB_ETHEREUM", devnodes.EthereumXpub)
	if _, _, err := paymentsFromEnv(db, logger); err != nil {
		t.Fatalf("first start: %v", err)
	}
	t.Setenv("KERNODECK_XPUB_ETHEREUM", anotherEthereumXpub)
	_, _, err := paymentsFromEnv(db, logger)
	if !errors.Is(err, recovery.ErrAccountKeyChanged) || !strings.Contains(err.Error(), "kernodeck xpub confirm ethereum") {
		t.Fatalf("start with another key: %v, want it refused with the command that confirms it", err)
	}
	var out, errOut bytes.Buffer
	if err := runXPub(ctx, config.Config{DatabaseURL: url}, []string{"confirm", "ethereum", "--by", "test-operator"}, &out, &errOut); err != nil {
		t.Fatalf("confirm: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "confirmed, replacing") {
		t.Fatalf("confirm said %q", out.String())
	}
	if _, _, err := paymentsFromEnv(db, logger); err != nil {
		t.Fatalf("start with the confirmed key: %v", err)
	}
}
