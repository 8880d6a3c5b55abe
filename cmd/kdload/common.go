package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// common are the flags both loads share.
type common struct {
	api          string
	supportToken string
	dbURL        string
	temporal     string
	namespace    string
	model        string
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
	c.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}}
	return nil
}

// call sends a JSON request and decodes a JSON answer into out (if not nil).
func (c *common) call(ctx context.Context, method, path, token string, body, out any) (int, error) {
	return c.callFrom(ctx, "", method, path, token, body, out)
}

// callFrom is call as a client behind the API's trusted proxy (loopback,
// KERNODECK_TRUSTED_PROXIES) whose address is clientIP: the API allows 10
// registrations per client address and hour. Only a header: nothing is
// sent to that address.
func (c *common) callFrom(ctx context.Context, clientIP, method, path, token string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.api+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if clientIP != "" {
		req.Header.Set("X-Forwarded-For", clientIP)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, nil
}

// customer registers customer number i and returns its bearer token. Each
// group of 5 comes from its own documentation address (TEST-NET-3).
func (c *common) customer(ctx context.Context, email string, i int) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	ip := fmt.Sprintf("203.0.113.%d", 1+(i/5)%250)
	st, err := c.callFrom(ctx, ip, "POST", "/v1/auth/register", "", map[string]any{
		"first_name": "Load", "last_name": "Test", "email": email,
		"password": "a sufficiently long passphrase", "bearer": true}, &out)
	if err != nil {
		return "", err
	}
	if st != http.StatusCreated || out.Token == "" {
		return "", fmt.Errorf("register %s: status %d", email, st)
	}
	return out.Token, nil
}

// createOrder creates a 30-day order of one lot and returns its reference.
func (c *common) createOrder(ctx context.Context, token string) (string, error) {
	var out struct {
		Order struct {
			Reference string `json:"reference"`
		} `json:"order"`
	}
	st, err := c.call(ctx, "POST", "/v1/orders", token, map[string]any{
		"gpu_model": c.model, "lots": 1, "duration_days": 30, "preset": "python"}, &out)
	if err != nil {
		return "", err
	}
	if st != http.StatusCreated {
		return "", fmt.Errorf("create order: status %d", st)
	}
	return out.Order.Reference, nil
}

// errConflict is the API's 409: for a retried attribution, the earlier
// attempt went through after its answer was lost.
var errConflict = errors.New("conflict")

// attribute pays an order by support attribution (the full amount due).
func (c *common) attribute(ctx context.Context, ref string) error {
	var out map[string]any
	st, err := c.call(ctx, "POST", "/v1/support/orders/"+ref+"/attribute-payment", c.supportToken,
		map[string]any{"reason": "kdload"}, &out)
	if err != nil {
		return err
	}
	switch st {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("attribute %s: %w: %v", ref, errConflict, out)
	}
	return fmt.Errorf("attribute %s: status %d %v", ref, st, out)
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
