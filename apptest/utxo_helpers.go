package apptest

// Helpers added for the UTXO watchers' tests (chainwatch/utxo); usable by
// any watcher test that runs a watcher as a child process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/secrets"
)

// SignalRelay serves the harness's Temporal signaler over HTTP and returns
// its URL. A watcher running in a child process (to be killed with SIGKILL)
// delivers its signals through an HTTPSignaler pointed there: Env does not
// expose the dev server's address, and this keeps the child's signals going
// to the same workflows. The relay forwards each signal synchronously, so
// the child sees exactly what TemporalSignaler would have returned.
func (e *Env) SignalRelay() string {
	e.T.Helper()
	sig := chainwatch.TemporalSignaler{Client: e.Temporal}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		if r.URL.Path == "/dust" {
			var d chainwatch.DustPending
			if err = json.NewDecoder(r.Body).Decode(&d); err == nil {
				err = sig.SignalDust(r.Context(), d)
			}
		} else {
			var p chainwatch.Pending
			if err = json.NewDecoder(r.Body).Decode(&p); err == nil {
				err = sig.Signal(r.Context(), p)
			}
		}
		switch {
		case errors.Is(err, chainwatch.ErrWorkflowClosed):
			http.Error(w, err.Error(), http.StatusGone)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	e.T.Cleanup(srv.Close)
	return srv.URL
}

// HTTPSignaler is the child process's side of SignalRelay.
type HTTPSignaler struct {
	URL string
}

// Signal posts p to the relay.
func (s HTTPSignaler) Signal(ctx context.Context, p chainwatch.Pending) error {
	return s.post(ctx, s.URL, p)
}

// SignalDust posts d to the relay.
func (s HTTPSignaler) SignalDust(ctx context.Context, d chainwatch.DustPending) error {
	return s.post(ctx, s.URL+"/dust", d)
}

func (s HTTPSignaler) post(ctx context.Context, url string, payload any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("signal relay: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusGone:
		return fmt.Errorf("%s: %w", bytes.TrimSpace(msg), chainwatch.ErrWorkflowClosed)
	default:
		return fmt.Errorf("signal relay: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
}

// EventsOfKind returns a target's timeline events of one kind, oldest first.
func (e *Env) EventsOfKind(ref, kind string) []domain.TimelineEvent {
	e.T.Helper()
	var out []domain.TimelineEvent
	for _, ev := range e.Timeline(ref) {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// EventData decodes a timeline event's data.
func EventData(ev domain.TimelineEvent) map[string]any {
	m := map[string]any{}
	if len(ev.Data) > 0 {
		_ = json.Unmarshal(ev.Data, &m)
	}
	return m
}

// PaymentRows counts the chain_payments rows of a network, all intents
// together (a payment stored twice would show here).
func (e *Env) PaymentRows(network string) int {
	e.T.Helper()
	var n int
	if err := e.DB.GetContext(e.Ctx, &n, `SELECT count(*) FROM chain_payments WHERE network = $1`, network); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// LeaseHolder returns who holds a network's watcher lease ("" if nobody).
func (e *Env) LeaseHolder(network string) string {
	e.T.Helper()
	var h []string
	if err := e.DB.SelectContext(e.Ctx, &h, `SELECT holder FROM watcher_leases WHERE network = $1 AND expires_at > now()`, network); err != nil {
		e.T.Fatal(err)
	}
	if len(h) == 0 {
		return ""
	}
	return h[0]
}

// testKeyring seals the access passwords localpg now requires a keyring for
// (a fresh random key per harness: nothing outlives the test).
func testKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(secrets.Generate("watchtest"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// History reads a workflow's history: the number of each signal received,
// and the number of events.
func (e *Env) History(workflowID string) (signals map[string]int, events int) {
	e.T.Helper()
	signals = map[string]int{}
	it := e.Temporal.GetWorkflowHistory(e.Ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.T.Fatal(err)
		}
		events++
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			signals[a.GetSignalName()]++
		}
	}
	return signals, events
}
