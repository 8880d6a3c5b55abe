package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// apiClient calls the JSON API in process, as the browser would: the same
// handler, the customer's own cookie and CSRF token, the client's address.
// The site therefore holds no rule of its own: validation, prices,
// throttling, ownership and their French messages all come from /v1.
type apiClient struct {
	h http.Handler
}

// call sends one request to the API on behalf of c's client. body (if not
// nil) is sent as JSON; a 2xx answer is decoded into out (if not nil). An
// error answer comes back as the API's *domain.Error (code, French message,
// field). Set-Cookie headers of the answer are passed on to the browser.
func (a apiClient) call(c *gin.Context, method, path, csrf string, body, out any) error {
	_, err := a.do(c, method, path, csrf, body, out)
	return err
}

// do is call, also returning the raw answer (for non-JSON bodies).
func (a apiClient) do(c *gin.Context, method, path, csrf string, body, out any) (*bufferedResponse, error) {
	return a.send(c, method, path, csrf, "", body, out)
}

// send is do, with a bearer token when not empty (the support console's
// sign-in exchanges the agent's token for a session).
func (a apiClient) send(c *gin.Context, method, path, csrf, bearer string, body, out any) (*bufferedResponse, error) {
	return a.sendWith(c, method, path, csrf, bearer, nil, body, out)
}

// sendWith is send with more request headers (a support action's
// Idempotency-Key).
func (a apiClient) sendWith(c *gin.Context, method, path, csrf, bearer string, extra http.Header, body, out any) (*bufferedResponse, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	// The API call belongs to this page request: it ends with it.
	req, err := http.NewRequestWithContext(c.Request.Context(), method, path, rd)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	in := c.Request
	req.RemoteAddr = in.RemoteAddr
	req.Host = in.Host
	for _, h := range []string{"Cookie", "X-Forwarded-For", "X-Real-Ip", "User-Agent", "Origin", "Accept-Language"} {
		if v := in.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	if req.Header.Get("Origin") == "" && method != http.MethodGet {
		// A same-origin form post that the browser sent without Origin (the
		// site checked it already): the API sees the site's own origin.
		req.Header.Set("Origin", requestOrigin(in))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp := newBufferedResponse()
	a.h.ServeHTTP(resp, req)
	for _, ck := range resp.header.Values("Set-Cookie") {
		c.Writer.Header().Add("Set-Cookie", ck)
	}
	if resp.status >= 200 && resp.status < 300 && !inProgress(resp) {
		if out != nil {
			if err := json.Unmarshal(resp.body.Bytes(), out); err != nil {
				return resp, fmt.Errorf("decode %s %s: %w", method, path, err)
			}
		}
		return resp, nil
	}
	var eb struct {
		Error domain.Error `json:"error"`
	}
	if err := json.Unmarshal(resp.body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
		if errors.Is(c.Request.Context().Err(), context.Canceled) {
			return resp, c.Request.Context().Err()
		}
		return resp, fmt.Errorf("%s %s: status %d without an error body", method, path, resp.status)
	}
	return resp, &eb.Error
}

// inProgress reports a 202 whose body is an error (domain.ECodeInProgress:
// accepted, not applied yet), not the resource.
func inProgress(resp *bufferedResponse) bool {
	if resp.status != http.StatusAccepted {
		return false
	}
	var eb struct {
		Error *domain.Error `json:"error"`
	}
	return json.Unmarshal(resp.body.Bytes(), &eb) == nil && eb.Error != nil && eb.Error.Code == domain.ECodeInProgress
}

// requestOrigin is the origin the client reached the site at.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// bufferedResponse collects an in-process answer.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newBufferedResponse() *bufferedResponse {
	return &bufferedResponse{header: http.Header{}}
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
