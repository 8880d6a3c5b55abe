package e2e

import (
	"context"
	"hash/fnv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// flakyProvisioner refuses reservations while failing is set, as a host
// that does not answer would after its retries.
type flakyProvisioner struct {
	*localpg.Provisioner
	failing atomic.Bool
	full    atomic.Bool // no machine free
}

func (p *flakyProvisioner) Reserve(ctx context.Context, in activities.ReserveInput) error {
	if p.full.Load() {
		return domain.Errorf(domain.ECodeNoCapacity, "Aucune machine libre.")
	}
	if p.failing.Load() {
		// A machine that does not match (no free machine would put the
		// order in line instead: vQueue).
		return domain.Errorf(activities.ErrTypeVerifyMismatch, "La machine ne correspond pas à la commande.")
	}
	return p.Provisioner.Reserve(ctx, in)
}

// withFlaky runs the local driver behind a switch that makes it refuse.
func withFlaky(out **flakyProvisioner) func(*envConfig) {
	return func(c *envConfig) {
		c.provisioner = func(db *postgres.DB, kr *secrets.Keyring) activities.Provisioner {
			*out = &flakyProvisioner{Provisioner: &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu-e2e.local", Port: 2222, Keyring: kr}}
			return *out
		}
	}
}

// payment sends a chain watcher's signal (the same payload the watcher
// sends) to a workflow.
func (e *env) payment(workflowID, signal string, p workflows.PaymentEvent) {
	e.t.Helper()
	p = e.addressed(workflowID, p)
	pgtest.Recorded(e.t, e.db, p.Claim()) // as the watcher records it before it signals
	if err := e.tc.SignalWorkflow(context.Background(), workflowID, "", signal, p); err != nil {
		e.t.Fatal(err)
	}
}

// addressed makes p what a watcher sends to workflowID: addressed to it
// and naming a payment request of its order or top-up, with the request's
// address, asset and network. Unless p names a stored request (Address
// set), one is stored for the target and the asset (superseded: never the
// target's open one).
func (e *env) addressed(workflowID string, p workflows.PaymentEvent) workflows.PaymentEvent {
	e.t.Helper()
	p.Target = workflowID
	if p.Address == "" {
		p.IntentID, p.Address = e.testRequest(workflowID, p.Asset, p.Network)
	}
	return p
}

// testRequest stores, once, a payment request of workflowID's target in
// asset on network, and returns its ID and address.
func (e *env) testRequest(workflowID, asset, network string) (id, address string) {
	e.t.Helper()
	kind, table, ref := "order", "orders", strings.TrimPrefix(workflowID, "rental-")
	if r, ok := strings.CutPrefix(workflowID, "topup-"); ok {
		kind, table, ref = "topup", "topups", r
	}
	id, address = "PI-E2E-"+ref+"-"+asset+"-"+network, "e2e-"+strings.ToLower(ref+"-"+asset)
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	now := time.Now()
	if _, err := e.db.Exec(`INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals,
		amount_base, usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until,
		request_key, status)
		SELECT $1, $2, $3, account_id, $4, $5, 8, $6::bigint, 100, 1, 'test', $7, $8, 1000000 + $6::bigint, 'test:' || $1, $9, $9,
		'e2e:' || $1, 'superseded'
		FROM `+table+` WHERE ref = $3
		ON CONFLICT (id) DO NOTHING`, id, kind, ref, asset, network, int64(h.Sum32())+1, now, address, now.Add(time.Hour)); err != nil {
		e.t.Fatal(err)
	}
	return id, address
}

func btc(txid string, cents int64, late bool) workflows.PaymentEvent {
	return workflows.PaymentEvent{Network: "bitcoin", Asset: "BTC", TxID: txid, Index: 0,
		AmountBase: "100000", AmountCents: cents, IntentID: "PI-RECORD", Late: late}
}

func (e *env) paid(workflowID string, p workflows.PaymentEvent) {
	e.payment(workflowID, workflows.SignalPaymentSeen, p)
	e.payment(workflowID, workflows.SignalPaymentConfirmed, p)
}

func (e *env) waitOrder(ref, status string) domain.Order {
	e.t.Helper()
	var o domain.Order
	e.waitFor("order "+ref+" "+status, func() bool {
		var err error
		o, err = e.db.GetOrder(context.Background(), ref)
		return err == nil && o.Status == status
	})
	return o
}

func (e *env) waitTopUp(ref, status string) {
	e.t.Helper()
	e.waitFor("top-up "+ref+" "+status, func() bool {
		tu, err := e.db.GetTopUp(context.Background(), ref)
		return err == nil && tu.Status == status
	})
}

// startOrder stores an order of 23.57 USD and starts its workflow with cfg
// (short timeouts where a case needs them).
func (e *env) startOrder(accountID int64, cfg workflows.RentalConfig) domain.Order {
	e.t.Helper()
	o := e.startOrderDays(accountID, 3, cfg)
	e.waitFor("workflow of "+o.Ref, func() bool {
		_, err := e.tc.DescribeWorkflow(context.Background(), workflows.RentalWorkflowID(o.Ref), "")
		return err == nil
	})
	return o
}

func (e *env) startTopUp(accountID, cents int64, timeout time.Duration) domain.TopUp {
	e.t.Helper()
	ctx := context.Background()
	tu, err := e.db.CreateTopUp(ctx, accountID, cents)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := (&wfclient.Client{Temporal: e.tc}).StartTopUp(ctx, workflows.NewTopUpInput(tu, timeout)); err != nil {
		e.t.Fatal(err)
	}
	return tu
}

func (e *env) account(email string) int64 {
	e.t.Helper()
	a, err := e.db.CreateAccount(context.Background(), domain.Account{FirstName: "R", LastName: "Test", Email: email}, "not-a-hash")
	if err != nil {
		e.t.Fatal(err)
	}
	return a.ID
}

func (e *env) support(path string, body map[string]any) {
	e.t.Helper()
	e.must(200, "POST", "/v1/support/"+path, agentToken, body)
}

// TestRecordedMoneyCases runs the money cases a change to the workflows
// must keep replaying (partial then rest, late, over, refund, extension,
// provisioning failure then retry, expiry with a partial payment, top-ups)
// and replays each real history; with KERNODECK_RECORD_HISTORY=1 they are
// written to workflows/testdata for the unit replay test.
func TestRecordedMoneyCases(t *testing.T) {
	var flaky *flakyProvisioner
	e := newEnv(t, withFlaky(&flaky))
	acc := e.account("record@example.com")
	cfg := workflows.RentalConfig{UnpaidTimeout: time.Hour, ProvisioningAttempts: 1}

	// Partial, then the rest; extended while active; ended early.
	o := e.startOrder(acc, cfg)
	wid := workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("aa01", 1000, false))
	e.waitFor("partial counted", func() bool { return e.order(o.Ref).PaidCents == 1000 })
	e.paid(wid, btc("aa02", 1357, false))
	e.waitOrder(o.Ref, domain.StatusActive)
	e.support("orders/"+o.Ref+"/extend", map[string]any{"days": 2, "reason": "geste commercial"})
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "demande du client"})
	e.waitOrder(o.Ref, domain.StatusEnded)
	replayHistory(t, e.tc, wid, "rental_partial_rest_extend.json")

	// Overpaid, then a payment after settlement.
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("bb01", 3000, false))
	e.waitOrder(o.Ref, domain.StatusActive)
	e.paid(wid, btc("bb02", 500, false))
	e.waitQueued(o.Ref, 2) // the excess of the first, all of the second
	e.support("orders/"+o.Ref+"/end-early", map[string]any{"reason": "fin"})
	e.waitOrder(o.Ref, domain.StatusEnded)
	replayHistory(t, e.tc, wid, "rental_overpaid_extra.json")

	// Late payment: part refunded from the queue, the rest counted, the
	// missing cents attributed by support.
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("cc01", 2357, true))
	e.waitFor("late payment recorded", func() bool { return e.order(o.Ref).LateCents == 2357 })
	q := e.waitQueued(o.Ref, 1)
	if st, out := e.refundException(str(q[0]["id"]), 100); st != 200 {
		t.Fatalf("refund: %d %v", st, out)
	}
	e.support("exceptions/"+str(q[0]["id"])+"/count", map[string]any{"reason": "paiement en retard accepté"})
	e.support("orders/"+o.Ref+"/attribute-payment", map[string]any{"reason": "frais offerts"})
	e.waitOrder(o.Ref, domain.StatusActive)
	replayHistory(t, e.tc, wid, "rental_late_exception_refund_count.json")

	// Provisioning fails, support retries, it fails again, support refunds.
	flaky.failing.Store(true)
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("dd01", 2357, false))
	e.waitOrder(o.Ref, domain.StatusProvisioningFailed)
	e.support("orders/"+o.Ref+"/retry-provisioning", map[string]any{"reason": "nouvel essai"})
	e.waitFor("second failure", func() bool {
		var n int
		_ = e.db.Get(&n, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = 'provisioning_failed'`, o.Ref)
		return n == 2
	})
	e.support("orders/"+o.Ref+"/refund", map[string]any{"amount_cents": 2357, "reason": "aucune machine"})
	e.waitFor("workflow closed", func() bool { return e.closed(wid) })
	replayHistory(t, e.tc, wid, "rental_provisioning_failed_retry_refund.json")

	// Provisioning fails, support retries, it works.
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.support("orders/"+o.Ref+"/attribute-payment", map[string]any{"reason": "virement"})
	e.waitOrder(o.Ref, domain.StatusProvisioningFailed)
	flaky.failing.Store(false)
	e.support("orders/"+o.Ref+"/retry-provisioning", map[string]any{"reason": "machine revenue"})
	e.waitOrder(o.Ref, domain.StatusActive)
	replayHistory(t, e.tc, wid, "rental_provisioning_retry_active.json")

	// No machine free: the paid order waits in line, then is served.
	flaky.full.Store(true)
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("wm01", 2357, false))
	e.waitOrder(o.Ref, domain.StatusWaitingForMachine)
	flaky.full.Store(false)
	e.waitOrder(o.Ref, domain.StatusActive)
	replayHistory(t, e.tc, wid, "rental_waited_for_machine.json")

	// In line, support refunds everything: the order closes.
	flaky.full.Store(true)
	o = e.startOrder(acc, cfg)
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("wm02", 2357, false))
	e.waitOrder(o.Ref, domain.StatusWaitingForMachine)
	e.support("orders/"+o.Ref+"/refund", map[string]any{"amount_cents": 2357, "reason": "aucune machine"})
	e.waitFor("workflow closed", func() bool { return e.closed(wid) })
	flaky.full.Store(false)
	if got := e.order(o.Ref); got.Status != domain.StatusRefunded || got.RefundedCents != 2357 {
		t.Fatalf("refunded from the line: %s, %d refunded", got.Status, got.RefundedCents)
	}
	replayHistory(t, e.tc, wid, "rental_line_refunded.json")

	// Expiry after a partial payment.
	o = e.startOrder(acc, workflows.RentalConfig{UnpaidTimeout: 3 * time.Second, ProvisioningAttempts: 1})
	wid = workflows.RentalWorkflowID(o.Ref)
	e.paid(wid, btc("ee01", 1000, false))
	e.waitOrder(o.Ref, domain.StatusExpired)
	e.waitFor("workflow closed", func() bool { return e.closed(wid) })
	replayHistory(t, e.tc, wid, "rental_expired_partial.json")

	// Top-up overpaid (credited once, the excess recorded).
	tu := e.startTopUp(acc, 10000, time.Hour)
	twid := workflows.TopUpWorkflowID(tu.Ref)
	e.paid(twid, btc("ff01", 12000, false))
	e.waitTopUp(tu.Ref, domain.TopUpCredited)
	replayHistory(t, e.tc, twid, "topup_overpaid.json")

	// Top-up expired after a partial payment.
	tu = e.startTopUp(acc, 10000, 3*time.Second)
	twid = workflows.TopUpWorkflowID(tu.Ref)
	e.paid(twid, btc("ff02", 4000, false))
	e.waitTopUp(tu.Ref, domain.TopUpExpired)
	e.waitFor("workflow closed", func() bool { return e.closed(twid) })
	replayHistory(t, e.tc, twid, "topup_expired_partial.json")
}

func (e *env) order(ref string) domain.Order {
	e.t.Helper()
	o, err := e.db.GetOrder(context.Background(), ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

func (e *env) closed(workflowID string) bool {
	d, err := e.tc.DescribeWorkflow(context.Background(), workflowID, "")
	return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() != nil
}
