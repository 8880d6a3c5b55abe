package solana

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// FuzzRPC serves arbitrary JSON-RPC answers (seeded with the recorded
// getSignaturesForAddress and getTransaction responses) to the client's
// parsers: signatures, transactions and the lamports an address received.
// Errors are fine; a panic, or an amount read for an address the
// transaction does not list, is not.
//
//	go test ./chainwatch/solana -run '^$' -fuzz '^FuzzRPC$' -fuzztime 10m
func FuzzRPC(f *testing.F) {
	for _, name := range []string{"getSignaturesForAddress.json", "getTransaction.json", "getTransaction_v0.json", "getSlot.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, "")
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"meta":{"preBalances":[1],"postBalances":[]},"transaction":{"message":{"accountKeys":[{"pubkey":"A"}]}}}}`), "A")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"meta":{"preBalances":[1e400],"postBalances":[-1]},"transaction":{"message":{"accountKeys":[{"pubkey":"A"}]}}}}`), "A")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32009,"message":"slot skipped"}}`), "")

	var mu sync.Mutex
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(body)
	}))
	f.Cleanup(srv.Close)
	c := &rpcClient{url: srv.URL, client: srv.Client()}
	f.Fuzz(func(t *testing.T, answer []byte, address string) {
		mu.Lock()
		body = answer
		mu.Unlock()
		ctx := context.Background()
		_, _ = c.signaturesForAddress(ctx, "addr", "")
		_, _ = c.finalizedSlot(ctx)
		tx, err := c.getTransaction(ctx, "sig")
		if err != nil || tx == nil {
			return
		}
		_ = tx.failed()
		got, err := tx.received(address)
		if err != nil || got == nil {
			return
		}
		for _, k := range tx.Transaction.Message.AccountKeys {
			if k.Pubkey == address {
				return
			}
		}
		t.Fatalf("amount %s for %q, not an account of the transaction", got, address)
	})
}
