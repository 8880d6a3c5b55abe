package utxo_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch/utxo"
)

func TestNewConfig(t *testing.T) {
	for _, c := range []struct {
		cfg utxo.Config
		ok  bool
	}{
		{utxo.Config{Host: "127.0.0.1:8332", User: "u", Pass: "p", Network: "bitcoin"}, true},
		{utxo.Config{Host: "127.0.0.1:8332", CookiePath: "/var/lib/bitcoind/.cookie", Network: "bitcoin"}, true},
		{utxo.Config{Host: "http://u:p@127.0.0.1:9332", Network: "litecoin"}, true},
		{utxo.Config{Host: "https://127.0.0.1:8332", Network: "bitcoin"}, false},
		{utxo.Config{Host: "127.0.0.1:8545", Network: "ethereum"}, false},
	} {
		ch, err := utxo.New(c.cfg)
		if (err == nil) != c.ok {
			t.Errorf("New(%+v): %v", c.cfg, err)
		}
		if err == nil {
			if ch.Network() != c.cfg.Network {
				t.Errorf("network %s", ch.Network())
			}
			ch.Close()
		}
	}
}

// TestContextEndsACall: rpcclient takes no context and its HTTP client has
// no timeout; a node that accepts and never answers must not hold the
// watcher past its context.
func TestContextEndsACall(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var conns []net.Conn // held open, never answered
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	ch, err := utxo.New(utxo.Config{Host: l.Addr().String(), User: "u", Pass: "p", Network: "bitcoin"})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = ch.Tip(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("Tip on a silent node: %v after %s", err, time.Since(start))
	}
}

// TestHungCallDoesNotBlockTheNext: rpcclient sends one HTTP request at a
// time; after a call times out on a node that never answers it, the next
// call must reach the node instead of queueing behind the hung one.
func TestHungCallDoesNotBlockTheNext(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-release // the first request hangs
			return
		}
		_, _ = io.WriteString(w, `{"result":123,"error":null,"id":1}`)
	}))
	defer srv.Close()
	defer close(release)
	ch, err := utxo.New(utxo.Config{Host: srv.URL, User: "u", Pass: "p", Network: "bitcoin", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.Tip(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first call: %v, want a timeout", err)
	}
	n, err := ch.Tip(context.Background())
	if err != nil || n != 123 {
		t.Fatalf("second call: %d, %v", n, err)
	}
}
