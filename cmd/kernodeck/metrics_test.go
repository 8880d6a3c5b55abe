package main

import (
	"io"

	dto "github.com/prometheus/client_model/go"
	"net/http"
	"strings"
	"testing"
	"time"
)

// After an order paid on the Litecoin regtest chain has gone through
// provisioning to active, the operations listener of the running service
// exports every family operators watch, each with a value that follows from
// what happened; /readyz says the database and Temporal answer, and the profiler answers
// there (not on the public listener). Then the
// committed alert expressions are evaluated (promtool) on that scrape: all
// quiet; and on a scrape after a mail failed, an order paid by support found
// no capacity, a payment waited 10 minutes undelivered and an overpayment
// waited an hour in support's exception queue: exactly those fire.
func TestMetricsAndAlertsOfARunningService(t *testing.T) {
	s := startService(t, map[string]string{"KERNODECK_PROVISIONING_ATTEMPTS": "1"})
	tok := s.customer("metrics@example.com")
	ref := s.newOrder(tok)
	s.payOnChain(tok, ref)
	s.waitStatus(tok, ref, "active")
	s.call("GET", "/v1/orders/"+ref, tok, nil)
	s.call("GET", "/v1/no-such-route", "", nil)

	tip := s.ltc.height()
	fams, raw := s.scrape()
	// The watcher may still be reading the last block: wait for the cursor
	// to reach the node's tip as the metrics say.
	s.waitFor(30*time.Second, "processed height = node height", func() bool {
		fams, raw = s.scrape()
		p, _ := value(fams, "kernodeck_chain_processed_height", map[string]string{"network": "litecoin"})
		n, _ := value(fams, "kernodeck_chain_node_height", map[string]string{"network": "litecoin"})
		return int64(p) == tip && int64(n) == tip
	})
	// The Temporal SDK flushes its metrics on its own schedule; the order
	// reached active only after its activities' tasks completed.
	type check struct {
		fam    string
		labels map[string]string
		ok     func(v float64) bool
		want   string
	}
	exactly := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
	checks := []check{
		{"kernodeck_http_requests_total", map[string]string{"method": "POST", "route": "/v1/orders", "status": "201"}, exactly(1), "1 order created"},
		{"kernodeck_http_requests_total", map[string]string{"method": "GET", "route": "/v1/orders/:ref", "status": "200"}, atLeast(2), ">= 2 reads by template"},
		{"kernodeck_http_requests_total", map[string]string{"route": "(no route)", "status": "404"}, exactly(1), "the unknown path under one label"},
		{"kernodeck_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/v1/orders"}, exactly(1), "1 observation"},
		{"kernodeck_chain_node_height", map[string]string{"network": "litecoin"}, exactly(float64(tip)), "the node's tip"},
		{"kernodeck_chain_processed_height", map[string]string{"network": "litecoin"}, exactly(float64(tip)), "the node's tip"},
		{"kernodeck_chain_seconds_since_last_block", map[string]string{"network": "litecoin"}, func(v float64) bool { return v >= 0 && v < 120 }, "recent"},
		{"kernodeck_chain_payments", map[string]string{"network": "litecoin", "state": "confirmed"}, exactly(1), "the payment, confirmed once"},
		{"kernodeck_chain_payments_undelivered", map[string]string{"network": "litecoin"}, exactly(0), "delivered"},
		{"kernodeck_chain_payments_undelivered_oldest_seconds", map[string]string{"network": "litecoin"}, exactly(0), "nothing waiting"},
		{"kernodeck_mail_outbox", map[string]string{"state": "pending"}, atLeast(1), "mails queued (no SMTP server here)"},
		// The paid order takes its machine (TakeMachine), then the
		// provisioning's reserve finds it taken (a no-op).
		{"kernodeck_provisioning_step_duration_seconds", map[string]string{"step": "reserve", "outcome": "ok"}, exactly(2), "a reservation, then its no-op"},
		{"kernodeck_provisioning_step_duration_seconds", map[string]string{"step": "create_access", "outcome": "ok"}, exactly(1), "one access"},
		{"kernodeck_orders", map[string]string{"status": "active"}, exactly(1), "the order"},
		{"kernodeck_payment_exceptions_open", nil, exactly(0), "paid exactly: nothing for support"},
		{"kernodeck_payment_exceptions_open_oldest_seconds", nil, exactly(0), "an empty queue"},
		{"kernodeck_machine_queue_waiting", map[string]string{"gpu_model": "rtx-a5000"}, exactly(0), "served at once: nobody in line"},
		{"kernodeck_machine_queue_oldest_wait_seconds", map[string]string{"gpu_model": "rtx-a5000"}, exactly(0), "nobody in line"},
		{"kernodeck_machine_queue_overdue", nil, exactly(0), "nobody in line"},
		{"temporal_workflow_task_execution_latency_seconds", map[string]string{"workflow_type": "RentalWorkflow"}, atLeast(1), "workflow tasks ran"},
		{"temporal_workflow_task_schedule_to_start_latency_seconds", nil, atLeast(1), "workflow tasks polled"},
		{"temporal_activity_schedule_to_start_latency_seconds", map[string]string{"activity_type": "Provision"}, atLeast(1), "activity polled"},
		{"temporal_activity_execution_latency_seconds", map[string]string{"activity_type": "Provision"}, atLeast(1), "activity ran"},
		{"process_resident_memory_bytes", nil, atLeast(1 << 20), "a resident set"},
		{"go_goroutines", nil, atLeast(10), "goroutines"},
	}
	for _, c := range checks {
		v, ok := value(fams, c.fam, c.labels)
		if !ok {
			t.Errorf("%s%v: missing", c.fam, c.labels)
			continue
		}
		if !c.ok(v) {
			t.Errorf("%s%v = %v, want %s", c.fam, c.labels, v, c.want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", raw)
	}

	resp, err := http.Get("http://" + s.ops + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "database: ok") || !strings.Contains(string(body), "temporal: ok") {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}
	// The profiler answers on the operators' listener, not the public one.
	for url, want := range map[string]int{
		"http://" + s.ops + "/debug/pprof/heap?debug=1": http.StatusOK,
		"http://" + s.api + "/debug/pprof/heap?debug=1": http.StatusNotFound,
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
		}
	}
	if t.Failed() {
		return
	}
	alertsPhase(t, s, tok, fams)
}

// configuredOnly are families an alert reads that a process exports only
// when it is configured so, with why the service under test lacks them.
var configuredOnly = map[string]string{
	"kernodeck_certificate_expiry_timestamp_seconds": "no TLS to Temporal or PostgreSQL here: no certificate file",
}

func alertsPhase(t *testing.T, s *service, tok string, fams map[string]*dto.MetricFamily) {
	// Every family an alert reads is in the healthy scrape, but those of
	// what this service does not use (its reason given).
	for _, name := range ruleFamilies(t) {
		if _, ok := fams[name]; !ok && configuredOnly[name] == "" {
			t.Errorf("alert rules read %s, which the service does not export", name)
		}
	}
	evalRules(t, fams, nil)

	// A mail failed for good.
	if _, err := s.db.Exec(`UPDATE mail_outbox SET state = 'failed' WHERE id = (SELECT min(id) FROM mail_outbox)`); err != nil {
		t.Fatal(err)
	}
	// An order paid by support finds no capacity left: it waits in line.
	ref := s.newOrder(tok)
	if _, err := s.db.Exec(`UPDATE gpu_inventory SET total_gpus = 0 WHERE gpu_model = 'rtx-a5000'`); err != nil {
		t.Fatal(err)
	}
	s.must(http.StatusOK, "POST", "/v1/support/orders/"+ref+"/attribute-payment", s.supportTok,
		map[string]any{"reason": "virement reçu"})
	s.waitStatus(tok, ref, "waiting_for_machine")
	// An order whose provisioning failed, waiting for support.
	failed := s.newOrder(tok)
	if _, err := s.db.Exec(`UPDATE orders SET status = 'provisioning_failed', paid_cents = total_cents, paid_at = now()
		WHERE ref = $1`, failed); err != nil {
		t.Fatal(err)
	}
	// A payment on a network no watcher here follows, seen 10 minutes ago
	// and never delivered to its workflow.
	if _, err := s.db.Exec(`
		INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base,
		                            amount_cents, late, block_height, block_hash, state, seen_at)
		SELECT 'bitcoin', 'ab' || id, 0, 'BTC', id, address, 1000, 1, false, 1, 'h', 'seen', now() - interval '10 minutes'
		FROM payment_intents LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	// An overpayment queued for support an hour ago, not settled.
	if _, err := s.db.Exec(`
		INSERT INTO payment_exceptions (target_kind, target_ref, account_id, reason, payment_key, amount_cents, created_at)
		SELECT 'order', ref, account_id, 'over', 'bitcoin:cd00:0', 500, now() - interval '1 hour'
		FROM orders WHERE ref = $1`, ref); err != nil {
		t.Fatal(err)
	}
	// A paid order has waited an hour for a machine (past
	// KERNODECK_QUEUE_ALERT_AFTER, 30 minutes by default).
	waiting := s.newOrder(tok)
	if _, err := s.db.Exec(`UPDATE orders SET status = 'waiting_for_machine', paid_cents = total_cents,
		paid_at = now() - interval '1 hour' WHERE ref = $1`, waiting); err != nil {
		t.Fatal(err)
	}
	fams, raw := s.scrape()
	// With a reservation refused (no capacity) seen, every family the
	// dashboard queries is exported.
	for _, name := range dashboardFamilies(t) {
		if _, ok := fams[name]; !ok {
			t.Errorf("the dashboard queries %s, which the service does not export", name)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", raw)
	}
	oldest, ok := value(fams, "kernodeck_chain_payments_undelivered_oldest_seconds", map[string]string{"network": "bitcoin"})
	if !ok || oldest < 600 {
		t.Fatalf("undelivered bitcoin payment: %v %v", oldest, ok)
	}
	queued, ok := value(fams, "kernodeck_payment_exceptions_open", nil)
	queuedAge, _ := value(fams, "kernodeck_payment_exceptions_open_oldest_seconds", nil)
	if !ok || queued != 1 || queuedAge < 3600 {
		t.Fatalf("exception queue: %v amounts (%v), oldest %v s; want 1, >= 3600 s", queued, ok, queuedAge)
	}
	line, _ := value(fams, "kernodeck_machine_queue_waiting", map[string]string{"gpu_model": "rtx-a5000"})
	lineAge, _ := value(fams, "kernodeck_machine_queue_oldest_wait_seconds", map[string]string{"gpu_model": "rtx-a5000"})
	if line != 2 || lineAge < 3600 {
		t.Fatalf("line for rtx-a5000: %v waiting, oldest %v s; want 2, >= 3600 s", line, lineAge)
	}
	evalRules(t, fams, map[string][]expSample{
		"KernodeckPaidOrderWaitingForMachine": {{Labels: `{}`, Value: 1}},
		"KernodeckMailsFailed":                {{Labels: `{state="failed"}`, Value: 1}},
		"KernodeckOrdersProvisioningFailed":   {{Labels: `{}`, Value: 1}},
		"KernodeckPaymentsUndelivered":        {{Labels: `{network="bitcoin"}`, Value: oldest}},
		"KernodeckSupportExceptionsWaiting":   {{Labels: `{}`, Value: 1}},
	})
}
