package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// keyedCall posts a support action under a given Idempotency-Key and
// returns the status, the raw body and whether it was a replay.
func (e *env) keyedCall(path, key string, body any) (int, string, bool) {
	e.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.api.URL+path, bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header.Get("Idempotent-Replayed") == "true"
}

// The finding of issue 36, item 4, on the real rental workflow: the same
// extension posted twice (one key) moves the end of an active rental by
// one day once, writes one audit row, and answers the same both times.
func TestSupportActionSentTwiceExtendsOnce(t *testing.T) {
	e := newEnv(t)
	tok := register(e, "Twice", "twice@example.com")
	ref := e.apiOrder(tok)
	e.support("orders/"+ref+"/attribute-payment", map[string]any{"reason": "virement reçu"})
	waitStatus(e, tok, ref, "active")
	before, err := e.db.GetOrder(context.Background(), ref)
	if err != nil || before.PeriodEnd == nil {
		t.Fatalf("active order: %+v %v", before, err)
	}

	body := map[string]any{"days": 1, "reason": "panne du nœud pendant une journée"}
	st1, body1, replay1 := e.keyedCall("/v1/support/orders/"+ref+"/extend", "e2e-extend-once-0001", body)
	st2, body2, replay2 := e.keyedCall("/v1/support/orders/"+ref+"/extend", "e2e-extend-once-0001", body)
	if st1 != http.StatusOK || st2 != http.StatusOK || body1 != body2 || replay1 || !replay2 {
		t.Fatalf("answers: %d %v %s / %d %v %s", st1, replay1, body1, st2, replay2, body2)
	}
	after, err := e.db.GetOrder(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.PeriodEnd.Sub(*before.PeriodEnd); got != 24*time.Hour {
		t.Fatalf("the end moved by %v, want one day", got)
	}
	var rows, extended int
	if err := e.db.Get(&rows, `SELECT count(*) FROM support_actions WHERE target_ref = $1 AND action = 'extend'`, ref); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Get(&extended, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = 'extended'`, ref); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || extended != 1 {
		t.Fatalf("%d extend rows, %d extensions on the timeline; want 1 and 1", rows, extended)
	}
}
