// Package apiclient is a small JSON client of Kernodeck's API as customers
// and support agents use it, for the load generator (cmd/kdload) and the
// chaos run (chaos/). Not for production callers: it knows only what those
// need.
package apiclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client calls one API base URL.
type Client struct {
	Base string
	HTTP *http.Client
}

// New returns a client with a connection pool sized for load.
func New(base string) *Client {
	return &Client{Base: base, HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}}}
}

// ErrConflict is the API's 409.
var ErrConflict = errors.New("conflict")

// Call sends a JSON request and decodes a JSON answer into out (if not
// nil). clientIP, if set, is sent as X-Forwarded-For: the caller is a
// client behind the API's trusted proxy (KERNODECK_TRUSTED_PROXIES); the
// API allows 10 registrations per client address and hour. Only a header:
// nothing is sent to that address.
func (c *Client) Call(ctx context.Context, clientIP, method, path, token string, body, out any) (int, error) {
	return c.call(ctx, clientIP, method, path, token, "", body, out)
}

// call is Call with a support action's Idempotency-Key (none: "").
func (c *Client) call(ctx context.Context, clientIP, method, path, token, key string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
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
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(req)
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

// Register creates a customer account from clientIP and returns its bearer
// token.
func (c *Client) Register(ctx context.Context, clientIP, email string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	st, err := c.Call(ctx, clientIP, "POST", "/v1/auth/register", "", map[string]any{
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

// CreateOrder orders one lot of model for days and returns the reference.
func (c *Client) CreateOrder(ctx context.Context, token, model string, days int) (string, error) {
	var out struct {
		Order struct {
			Reference string `json:"reference"`
		} `json:"order"`
	}
	st, err := c.Call(ctx, "", "POST", "/v1/orders", token, map[string]any{
		"gpu_model": model, "lots": 1, "duration_days": days, "preset": "python"}, &out)
	if err != nil {
		return "", err
	}
	if st != http.StatusCreated {
		return "", fmt.Errorf("create order: status %d", st)
	}
	return out.Order.Reference, nil
}

// Attribute pays an order by support attribution (the full amount due).
func (c *Client) Attribute(ctx context.Context, supportToken, ref string) error {
	var out map[string]any
	// A new key: each call is a new attribution (the workflow refuses one
	// of an order already paid).
	st, err := c.call(ctx, "", "POST", "/v1/support/orders/"+ref+"/attribute-payment", supportToken, rand.Text(),
		map[string]any{"reason": "load test"}, &out)
	if err != nil {
		return err
	}
	switch st {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("attribute %s: %w: %v", ref, ErrConflict, out)
	}
	return fmt.Errorf("attribute %s: status %d %v", ref, st, out)
}

// PaymentRequest asks for a payment request of an order and returns its
// address and exact amount in whole units.
func (c *Client) PaymentRequest(ctx context.Context, token, ref, asset, network string) (address, amount string, err error) {
	var out struct {
		PI struct {
			Address string `json:"address"`
			Amount  string `json:"amount"`
		} `json:"payment_intent"`
	}
	st, err := c.Call(ctx, "", "POST", "/v1/orders/"+ref+"/payment-intents", token,
		map[string]any{"asset": asset, "network": network}, &out)
	if err != nil {
		return "", "", err
	}
	// 200: the request was made already (asked again after a timeout).
	if st != http.StatusCreated && st != http.StatusOK {
		return "", "", fmt.Errorf("payment request %s: status %d", ref, st)
	}
	return out.PI.Address, out.PI.Amount, nil
}
