package e2e

import (
	"context"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// The must-show cases of "no money stranded", each on a real Temporal dev
// server, real PostgreSQL, the real activities and the API over HTTP.

func (e *env) balance(accountID int64) int64 {
	e.t.Helper()
	b, err := e.db.Balance(context.Background(), accountID)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.AvailableCents
}

// queue reads support's exception queue through the API.
func (e *env) queue() []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, x := range asList(e.must(http.StatusOK, "GET", "/v1/support/exceptions", agentToken, nil)["exceptions"]) {
		out = append(out, x.(map[string]any))
	}
	return out
}

func (e *env) queueOf(ref string) []map[string]any {
	var out []map[string]any
	for _, x := range e.queue() {
		if str(x["target_reference"]) == ref {
			out = append(out, x)
		}
	}
	return out
}

func (e *env) waitQueued(ref string, n int) []map[string]any {
	e.t.Helper()
	var q []map[string]any
	e.waitFor("exceptions of "+ref, func() bool { q = e.queueOf(ref); return len(q) == n })
	return q
}

func (e *env) refundException(id string, cents int64) (int, map[string]any) {
	body := map[string]any{"reason": "remboursement au solde"}
	if cents > 0 {
		body["amount_cents"] = cents
	}
	return e.call("POST", "/v1/support/exceptions/"+id+"/refund", agentToken, body)
}

func errCode(out map[string]any) string {
	m, _ := out["error"].(map[string]any)
	return str(m["code"])
}

// An order that expires after a partial payment: the amount goes to the
// queue and support refunds it to the balance, which rises by exactly that
// amount; a second refund is refused.
func TestExpiredPartialPaymentRefundedToBalance(t *testing.T) {
	e := newEnv(t)
	acc := e.account("partial@example.com")
	o := e.startOrder(acc, workflows.RentalConfig{UnpaidTimeout: 3 * time.Second, ProvisioningAttempts: 1})
	e.paid(workflows.RentalWorkflowID(o.Ref), btc("partial01", 1000, false))
	e.waitOrder(o.Ref, domain.StatusExpired)

	q := e.waitQueued(o.Ref, 1)
	if str(q[0]["reason"]) != "partial" || str(q[0]["remaining_cents"]) != "1000" || str(q[0]["customer_email"]) != "partial@example.com" ||
		str(q[0]["txid"]) != "partial01" || str(q[0]["network"]) != "bitcoin" {
		t.Fatalf("queued: %v", q[0])
	}
	before := e.balance(acc)
	if st, out := e.refundException(str(q[0]["id"]), 0); st != http.StatusOK {
		t.Fatalf("refund: %d %v", st, out)
	}
	if got := e.balance(acc) - before; got != 1000 {
		t.Fatalf("balance rose by %d, want 1000", got)
	}
	if q := e.queueOf(o.Ref); len(q) != 0 {
		t.Fatalf("still queued: %v", q)
	}
	if st, out := e.refundException(str(q[0]["id"]), 0); st != http.StatusConflict || errCode(out) != "conflict" {
		t.Fatalf("second refund: %d %v", st, out)
	}
	if got := e.balance(acc) - before; got != 1000 {
		t.Fatalf("balance rose by %d after a refused refund", got)
	}
	e.ledgerBalances()
}

// A payment that arrives after the order's workflow closed goes through the
// watcher's real store and signaller, lands in the queue, is found by its
// txid, refunded once; a second refund is refused.
func TestPaymentAfterWorkflowClosedRefundedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.account("closed@example.com")
	o := e.startOrder(acc, workflows.RentalConfig{UnpaidTimeout: 3 * time.Second, ProvisioningAttempts: 1})
	addr := e.intent(o.Ref, acc, 2357, "bc1qclosedaddress0000000000000000000000000", "36262")
	e.waitOrder(o.Ref, domain.StatusExpired)
	e.waitFor("workflow closed", func() bool { return e.closed(workflows.RentalWorkflowID(o.Ref)) })

	// The watcher's own store calls, under its lease.
	if ok, err := e.db.AcquireLease(ctx, "bitcoin", "e2e", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	seen := chainwatch.Seen{TxID: "afterclose01", Index: 1, Asset: "BTC", Address: addr, Amount: big.NewInt(36262),
		BlockHeight: 101, BlockHash: "h101", BlockTime: time.Now()}
	if err := e.db.RecordBlock(ctx, "bitcoin", "e2e", 101, "h101", []chainwatch.Seen{seen}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Confirm(ctx, "bitcoin", "e2e", 101); err != nil {
		t.Fatal(err)
	}
	if err := chainwatch.Reconcile(ctx, "bitcoin", e.db, chainwatch.TemporalSignaler{Client: e.tc}); err != nil {
		t.Fatal(err)
	}
	q := e.waitQueued(o.Ref, 1)
	if str(q[0]["reason"]) != "after_close" || str(q[0]["remaining_cents"]) != "2357" || str(q[0]["txid"]) != "afterclose01" {
		t.Fatalf("queued: %v", q[0])
	}
	found := asList(e.must(http.StatusOK, "GET", "/v1/support/find?q=afterclose01", agentToken, nil)["results"])
	if len(found) != 1 || str(found[0].(map[string]any)["reference"]) != o.Ref {
		t.Fatalf("find by txid: %v", found)
	}
	before := e.balance(acc)
	if st, out := e.refundException(str(q[0]["id"]), 0); st != http.StatusOK {
		t.Fatalf("refund: %d %v", st, out)
	}
	if st, out := e.refundException(str(q[0]["id"]), 0); st != http.StatusConflict {
		t.Fatalf("second refund: %d %v", st, out)
	}
	if got := e.balance(acc) - before; got != 2357 {
		t.Fatalf("balance rose by %d, want 2357 once", got)
	}
	if st := e.order(o.Ref).Status; st != domain.StatusExpired {
		t.Fatalf("a refund from the queue changed the order's status: %s", st)
	}
	e.ledgerBalances()
}

// intent stores a payment request for a target, as the payments service
// would (the address and amount are the test's), and returns its address.
func (e *env) intent(ref string, accountID, cents int64, address, amountBase string) string {
	e.t.Helper()
	id := "PI-" + strings.TrimPrefix(ref, "KD-")
	now := time.Now()
	if _, err := e.db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		VALUES ($1, 'order', $2, $3, 'BTC', 'bitcoin', 8, $4, $5, 65000, 'test', $6, $7, 900, 'bitcoin:x', $8, $9, 'intent:test')`,
		id, ref, accountID, amountBase, cents, now, address, now.Add(time.Hour), now.Add(25*time.Hour)); err != nil {
		e.t.Fatal(err)
	}
	return address
}

// An overpaid top-up credits its amount once; the excess is queued and
// refundable to the balance.
func TestOverpaidTopUpExcessRefundable(t *testing.T) {
	e := newEnv(t)
	acc := e.account("over@example.com")
	tu := e.startTopUp(acc, 10000, time.Hour)
	e.paid(workflows.TopUpWorkflowID(tu.Ref), btc("over01", 12500, false))
	e.waitTopUp(tu.Ref, domain.TopUpCredited)
	if b := e.balance(acc); b != 10000 {
		t.Fatalf("credited %d, want 10000", b)
	}
	q := e.waitQueued(tu.Ref, 1)
	if str(q[0]["reason"]) != "over" || str(q[0]["remaining_cents"]) != "2500" || str(q[0]["target_kind"]) != "topup" {
		t.Fatalf("queued: %v", q[0])
	}
	// A partial refund leaves the rest queued.
	if st, out := e.refundException(str(q[0]["id"]), 500); st != http.StatusOK {
		t.Fatalf("refund: %d %v", st, out)
	}
	if q := e.queueOf(tu.Ref); len(q) != 1 || str(q[0]["remaining_cents"]) != "2000" {
		t.Fatalf("after a partial refund: %v", q)
	}
	if st, out := e.refundException(str(q[0]["id"]), 0); st != http.StatusOK {
		t.Fatalf("refund of the rest: %d %v", st, out)
	}
	if b := e.balance(acc); b != 12500 {
		t.Fatalf("balance %d, want 12500", b)
	}
	e.ledgerBalances()
}

// A refund of everything in provisioning_failed leaves the order refunded
// in PostgreSQL, the API and KdStatus; a 1-cent refund before it leaves the
// rest refundable.
func TestClosingRefundLeavesOrderRefundedEverywhere(t *testing.T) {
	var flaky *flakyProvisioner
	e := newEnv(t, withFlaky(&flaky))
	flaky.failing.Store(true)
	tok := register(e, "Rita", "rita@example.com")
	acc := e.accountID("rita@example.com")
	ref := e.apiOrder(tok)
	e.paid(workflows.RentalWorkflowID(ref), btc("fail01", 2357, false))
	e.waitOrder(ref, domain.StatusProvisioningFailed)

	e.support("orders/"+ref+"/refund", map[string]any{"amount_cents": 1, "reason": "essai d'un centime"})
	if o := e.order(ref); o.Status != domain.StatusProvisioningFailed || o.RefundedCents != 1 {
		t.Fatalf("after 1 cent: %s, refunded %d", o.Status, o.RefundedCents)
	}
	if st, out := e.call("POST", "/v1/support/orders/"+ref+"/refund", agentToken,
		map[string]any{"amount_cents": 2357, "reason": "trop"}); st != http.StatusConflict {
		t.Fatalf("refund above the rest: %d %v", st, out)
	}
	e.support("orders/"+ref+"/refund", map[string]any{"amount_cents": 2356, "reason": "aucune machine"})
	e.waitOrder(ref, domain.StatusRefunded)
	o, _, _ := order(e, tok, ref)
	if str(o["status"]) != "refunded" || str(o["refunded_cents"]) != "2357" {
		t.Fatalf("API: %v", o)
	}
	e.waitFor("KdStatus refunded", func() bool { return e.kdStatus(workflows.RentalWorkflowID(ref)) == "refunded" })
	if b := e.balance(acc); b != 2357 {
		t.Fatalf("balance %d, want 2357", b)
	}
	e.ledgerBalances()
}

// late_cents is read back through the API, and counting the late payment
// from the queue pays the order.
func TestLateCentsThroughAPIThenCounted(t *testing.T) {
	e := newEnv(t)
	tok := register(e, "Lea", "lea@example.com")
	ref := e.apiOrder(tok)
	e.paid(workflows.RentalWorkflowID(ref), btc("late01", 2357, true))
	e.waitFor("late_cents", func() bool {
		o, _, _ := order(e, tok, ref)
		return str(o["late_cents"]) == "2357"
	})
	o, _, _ := order(e, tok, ref)
	if str(o["status"]) != "awaiting_payment" || str(o["paid_cents"]) != "0" {
		t.Fatalf("a late payment was counted: %v", o)
	}
	q := e.waitQueued(ref, 1)
	e.must(http.StatusOK, "POST", "/v1/support/exceptions/"+str(q[0]["id"])+"/count", agentToken, map[string]any{"reason": "retard accepté"})
	waitStatus(e, tok, ref, "active")
	o, _, _ = order(e, tok, ref)
	if str(o["late_cents"]) != "0" || str(o["paid_cents"]) != "2357" {
		t.Fatalf("after counting: %v", o)
	}
	if q := e.queueOf(ref); len(q) != 0 {
		t.Fatalf("still queued: %v", q)
	}
}

// Attributing 1,000,000 USD to a 47.14 USD order is refused; attributing
// the total makes nothing refundable.
func TestHugeAttributionRefusedAndNothingRefundable(t *testing.T) {
	e := newEnv(t)
	tok := register(e, "Hugo", "hugo@example.com")
	acc := e.accountID("hugo@example.com")
	created := e.must(http.StatusCreated, "POST", "/v1/orders", tok, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 2, "duration_days": 3, "preset": "python"})
	ref := str(created["order"].(map[string]any)["reference"])
	waitStatus(e, tok, ref, "awaiting_payment")
	st, out := e.call("POST", "/v1/support/orders/"+ref+"/attribute-payment", agentToken,
		map[string]any{"amount_cents": 100_000_000, "reason": "erreur de frappe"})
	if st != http.StatusConflict {
		t.Fatalf("1,000,000 USD attribution: %d %v", st, out)
	}
	e.support("orders/"+ref+"/attribute-payment", map[string]any{"reason": "virement reçu"})
	waitStatus(e, tok, ref, "active")
	st, out = e.call("POST", "/v1/support/orders/"+ref+"/refund", agentToken, map[string]any{"amount_cents": 1, "reason": "essai"})
	if st != http.StatusConflict {
		t.Fatalf("refund of an attribution: %d %v", st, out)
	}
	if b := e.balance(acc); b != 0 {
		t.Fatalf("balance %d, want 0", b)
	}
}

// The API and the workflow apply one extension rule: 1 to 30 days, the
// same code and message.
func TestExtensionLimitsIdenticalInAPIAndWorkflow(t *testing.T) {
	e := newEnv(t)
	tok := register(e, "Ext", "ext@example.com")
	ref := e.apiOrder(tok)
	e.support("orders/"+ref+"/attribute-payment", map[string]any{"reason": "virement"})
	waitStatus(e, tok, ref, "active")
	wf := &wfclient.Client{Temporal: e.tc}
	for _, days := range []int{0, 31, 90} {
		st, out := e.call("POST", "/v1/support/orders/"+ref+"/extend", agentToken, map[string]any{"days": days, "reason": "test"})
		apiErr, _ := out["error"].(map[string]any)
		err := wf.Extend(context.Background(), ref, workflows.Extension{ActionID: 9000 + int64(days), Agent: "t", Days: days, Reason: "test"})
		if st != http.StatusBadRequest || domain.ErrorCode(err) != str(apiErr["code"]) || domain.ErrorMessage(err) != str(apiErr["message"]) {
			t.Fatalf("%d days: API %d %v, workflow %v", days, st, apiErr, err)
		}
	}
	e.support("orders/"+ref+"/extend", map[string]any{"days": 30, "reason": "trente jours"})
	id := e.supportRow(ref, domain.ActionExtend, map[string]any{"days": 1}) // audited first, as the API does
	if err := wf.Extend(context.Background(), ref, workflows.Extension{ActionID: id, Agent: "e2e-agent", Days: 1, Reason: "un jour"}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) accountID(email string) int64 {
	e.t.Helper()
	a, _, err := e.db.AccountByEmail(context.Background(), email)
	if err != nil {
		e.t.Fatal(err)
	}
	return a.ID
}

// apiOrder orders 1 lot of rtx-a5000 for 3 days (23.57 USD) through the API.
func (e *env) apiOrder(tok string) string {
	e.t.Helper()
	created := e.must(http.StatusCreated, "POST", "/v1/orders", tok, map[string]any{
		"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"})
	ref := str(created["order"].(map[string]any)["reference"])
	waitStatus(e, tok, ref, "awaiting_payment")
	return ref
}

func (e *env) kdStatus(workflowID string) string {
	d, err := e.tc.DescribeWorkflow(context.Background(), workflowID, "")
	if err != nil {
		return ""
	}
	raw := d.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.SearchAttrStatus]
	return strings.Trim(string(raw.GetData()), `"`)
}

func (e *env) ledgerBalances() {
	e.t.Helper()
	var sum int64
	if err := e.db.Get(&sum, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries`); err != nil || sum != 0 {
		e.t.Fatalf("ledger does not balance: %d %v", sum, err)
	}
}
