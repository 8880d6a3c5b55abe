package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/kernodeck/kernodeck/apiclient"
)

// common are the flags both loads share.
type common struct {
	api          string
	supportToken string
	dbURL        string
	temporal     string
	namespace    string
	model        string
	client       *apiclient.Client
	http         *http.Client
}

func (c *common) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.api, "api", "http://127.0.0.1:38080", "the API's base URL (loopback only)")
	fs.StringVar(&c.supportToken, "support-token", "kdload-support-token-0123456789", "a support agent token of the API")
	fs.StringVar(&c.dbURL, "db", "postgres://postgres@127.0.0.1:5432/kd_load?sslmode=disable", "the service's database")
	fs.StringVar(&c.temporal, "temporal", "127.0.0.1:37233", "Temporal frontend")
	fs.StringVar(&c.namespace, "namespace", "default", "Temporal namespace")
	fs.StringVar(&c.model, "model", "rtx-a5000", "GPU model ordered")
}

// loopbackOnly refuses to send load anywhere but this machine.
func (c *common) loopbackOnly() error {
	for _, raw := range []string{c.api, "tcp://" + c.temporal} {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("%s is not a loopback address: kdload only loads this machine", raw)
		}
	}
	c.client = apiclient.New(c.api)
	c.http = c.client.HTTP
	return nil
}

// customer registers customer number i and returns its bearer token. Each
// group of 5 registers from its own documentation address (TEST-NET-3).
func (c *common) customer(ctx context.Context, email string, i int) (string, error) {
	return c.client.Register(ctx, fmt.Sprintf("203.0.113.%d", 1+(i/5)%250), email)
}

// createOrder creates a 30-day order of one lot and returns its reference.
func (c *common) createOrder(ctx context.Context, token string) (string, error) {
	return c.client.CreateOrder(ctx, token, c.model, 30)
}

// attribute pays an order by support attribution (the full amount due).
func (c *common) attribute(ctx context.Context, ref string) error {
	return c.client.Attribute(ctx, c.supportToken, ref)
}

// call sends a JSON request and decodes a JSON answer into out (if not nil).
func (c *common) call(ctx context.Context, method, path, token string, body, out any) (int, error) {
	return c.client.Call(ctx, "", method, path, token, body, out)
}

// latencies summarises durations.
type latencies []time.Duration

func (l latencies) q(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// parallel runs fn(i) for i in [0, n) on conc goroutines; the first error
// stops the rest.
func parallel(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	errc := make(chan error, conc)
	for range conc {
		go func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
			errc <- nil
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	for range conc {
		<-errc
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
