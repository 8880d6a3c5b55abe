package workflows_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/workflows"
)

// Bugs the randomized invariant test found, each replayed as one scripted
// sequence on the same harness (real workflow, activities and PostgreSQL).

func rtxQuote(lots int) *domain.Quote {
	return &domain.Quote{Configuration: domain.Configuration{Model: "rtx-a5000", Lots: lots, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: lots, LotCents: 2357, TotalCents: int64(lots) * 2357}
}

var errPending = errors.New("update not answered")

// codeOf is the domain code an update refusal carries.
func codeOf(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// at runs fn d after the workflow's start.
func (s *invSeq) at(d time.Duration, name string, fn func(s *invSeq)) {
	s.step(d, invAction{name: name, run: fn})
}

// directIntent is the payment request the direct signals name: a real one
// of the sequence's target, made once.
func (s *invSeq) directIntent() domain.Intent {
	if s.directReq.ID == "" {
		kind := domain.TargetOrder
		if s.topup {
			kind = domain.TargetTopUp
		}
		it, err := s.w.acts.Payments.CreateIntent(s.ctx, activities.CreateIntentInput{TargetKind: kind, TargetRef: s.ref,
			AccountID: s.acc, Asset: "BTC", Network: domain.NetworkBitcoin, USDCents: s.total, RequestKey: "direct"})
		s.must(err, "direct payment request")
		s.directReq = it
	}
	return s.directReq
}

// direct addresses p as a watcher would: to the sequence's workflow,
// naming its payment request, and recorded as a watcher records it.
func (s *invSeq) direct(p workflows.PaymentEvent) workflows.PaymentEvent {
	it := s.directIntent()
	p.Target, p.IntentID, p.Address = s.wid, it.ID, it.Address
	pgtest.Recorded(s.t, s.w.db, p.Claim())
	return p
}

// confirmDirect signals a confirmed payment as a watcher would.
func (s *invSeq) confirmDirect(txid string, cents int64) {
	s.env.SignalWorkflow(workflows.SignalPaymentConfirmed, s.direct(workflows.PaymentEvent{Network: domain.NetworkBitcoin, Asset: "BTC",
		TxID: txid, AmountBase: "1000", AmountCents: cents}))
}

// updateExpect sends an update and records its error (nil when accepted).
func (s *invSeq) updateExpect(got *error, name string, args ...any) {
	for i := range args {
		args[i] = s.audited(name, args[i])
	}
	s.update++
	s.env.UpdateWorkflow(name, time.Duration(s.update).String(), &testsuite.TestUpdateCallback{
		OnAccept:   func() {},
		OnReject:   func(err error) { *got = err },
		OnComplete: func(_ any, err error) { *got = err },
	}, args...)
}

func (s *invSeq) orderRow() (status string, paid, refunded int64) {
	var o struct {
		Status   string `db:"status"`
		Paid     int64  `db:"paid_cents"`
		Refunded int64  `db:"refunded_cents"`
	}
	s.must(s.w.db.GetContext(s.ctx, &o, `SELECT status, paid_cents, refunded_cents FROM orders WHERE ref = $1`, s.ref), "order")
	return o.Status, o.Paid, o.Refunded
}

// An overpayment's excess goes to support's queue: it is refundable from
// there, and no longer also by the order's refund (it was refundable twice).
func TestOverpaymentExcessRefundableOnlyFromTheQueue(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 1, 0, rtxQuote(1))
	s.at(time.Minute, "pay 30.16 USD", func(s *invSeq) { s.confirmDirect("over1", 3016) })
	var tooMuch, ok error = errPending, errPending
	s.at(90*time.Minute, "refunds", func(s *invSeq) {
		if q := s.query(); q.status != domain.StatusActive || q.refundable != 2357 {
			s.fatalf("before the refunds: %+v, want active with 2357 refundable", q)
		}
		s.updateExpect(&tooMuch, workflows.UpdateRefund, workflows.Refund{ActionID: 1, Agent: "a", AmountCents: 3016, Reason: "r"})
		s.updateExpect(&ok, workflows.UpdateRefund, workflows.Refund{ActionID: 2, Agent: "a", AmountCents: 2357, Reason: "r"})
	})
	start()
	if codeOf(tooMuch) != domain.ECodeConflict || ok != nil {
		t.Fatalf("refund of the excess too: %v; of the counted part: %v", tooMuch, ok)
	}
	es := s.exceptions()
	if len(es) != 1 || es[0].Reason != domain.ExceptionOver || es[0].RemainingCents() != 659 {
		t.Fatalf("queue: %+v", es)
	}
	if _, paid, refunded := s.orderRow(); paid != 3016 || refunded != 2357 {
		t.Fatalf("paid %d refunded %d", paid, refunded)
	}
}

// A partial crypto payment, then the rest from the balance: the order's
// paid_cents in PostgreSQL is the whole total, as in the workflow (the
// balance payment used to overwrite it with its own amount).
func TestBalancePaymentAfterPartialKeepsPaidCents(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 2, 0, rtxQuote(1))
	tu, err := w.db.CreateTopUp(s.ctx, s.acc, 10000)
	s.must(err, "top-up")
	s.must(w.db.CreditTopUp(s.ctx, domain.CreditTopUpInput{TopUpRef: tu.Ref, AccountID: s.acc, AmountCents: 10000, At: time.Now()}), "credit")
	s.at(time.Minute, "pay 10 USD", func(s *invSeq) { s.confirmDirect("part1", 1000) })
	var paid error = errPending
	s.at(2*time.Minute, "pay the rest from the balance", func(s *invSeq) { s.updateExpect(&paid, workflows.UpdatePayFromBalance) })
	s.at(3*time.Minute, "read", func(s *invSeq) {
		if _, p, _ := s.orderRow(); p != 2357 || s.query().paid != 2357 {
			s.fatalf("paid_cents %d in PostgreSQL, %d in the workflow, want 2357", p, s.query().paid)
		}
	})
	start()
	if paid != nil {
		t.Fatal(paid)
	}
	if b, _ := w.db.Balance(s.ctx, s.acc); b.AvailableCents != 10000-1357 {
		t.Fatalf("balance %d, want %d", b.AvailableCents, 10000-1357)
	}
}

// An order paid by a support attribution alone that finds no machine has
// nothing to refund: support cancels it from the line (it used to stay
// open forever), and the machine nobody freed is never reserved.
func TestWaitingWithNothingRefundableCancelledBySupport(t *testing.T) {
	w := newInvWorld(t)
	q := &domain.Quote{Configuration: domain.Configuration{Model: "mi210", Lots: 10, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: 10, LotCents: 7490, TotalCents: 74900}
	s, start := w.newSeq(t, 3, 0, q)
	var attributed, refund, cancel error = errPending, errPending, errPending
	s.at(time.Minute, "attribute", func(s *invSeq) {
		s.updateExpect(&attributed, workflows.UpdateAttributePayment, workflows.Attribution{ActionID: 1, Agent: "a", Reason: "vu"})
	})
	s.at(time.Hour, "close", func(s *invSeq) {
		if st := s.query().status; st != domain.StatusWaitingForMachine {
			s.fatalf("status %s, want waiting_for_machine", st)
		}
		s.updateExpect(&refund, workflows.UpdateRefund, workflows.Refund{ActionID: 2, Agent: "a", AmountCents: 1, Reason: "r"})
		s.updateExpect(&cancel, workflows.UpdateCancel, workflows.CancelRequest{By: "support", ActionID: 3, Agent: "a", Reason: "r"})
	})
	start()
	if attributed != nil || refund == nil || cancel != nil {
		t.Fatalf("attribution %v, refund %v (want refused), cancel %v", attributed, refund, cancel)
	}
	if st, _, _ := s.orderRow(); st != domain.StatusCancelled || s.query().status != domain.StatusCancelled || s.kd != domain.StatusCancelled {
		t.Fatalf("status %s in PostgreSQL, %s in the workflow, %s in KdStatus", st, s.query().status, s.kd)
	}
	var held int
	s.must(w.db.GetContext(s.ctx, &held, `SELECT count(*) FROM gpu_reservations WHERE order_ref = $1 AND state <> 'released'`, s.ref), "reservations")
	if held != 0 {
		t.Fatalf("%d reservations still held", held)
	}
}

// Dust removed by a reorganisation: its request's summary falls to 0, and
// the queued row has nothing left to refund (it kept its old total, so
// support could refund dust the chain no longer held; seed 5167).
func TestDustGoneAfterReorgLeavesNothingRefundable(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 3, 0, rtxQuote(1))
	dust := func(version, cents int64) func(s *invSeq) {
		return func(s *invSeq) {
			it := s.directIntent()
			d := workflows.DustSummary{Addressed: domain.Addressed{Target: s.wid},
				Network: domain.NetworkBitcoin, Asset: "BTC", IntentID: it.ID, Address: it.Address,
				Version: version, Outputs: version % 2, AmountBase: "69", AmountCents: cents}
			pgtest.Recorded(s.t, s.w.db, d.Claim())
			s.env.SignalWorkflow(workflows.SignalPaymentDust, d)
		}
	}
	s.at(time.Minute, "dust worth 4 cents", dust(1, 4))
	s.at(2*time.Minute, "queued", func(s *invSeq) {
		if es := s.exceptions(); len(es) != 1 || es[0].Reason != domain.ExceptionDust || es[0].RemainingCents() != 4 {
			s.fatalf("queue: %+v", es)
		}
	})
	s.at(3*time.Minute, "reorganised away", dust(2, 0))
	start()
	es := s.exceptions()
	if len(es) != 1 || es[0].RemainingCents() != 0 || es[0].VoidedCents != 4 || es[0].ShortfallCents != 0 {
		t.Fatalf("queue after the reorganisation: %+v", es)
	}
}

// signalGen signals a payment state of a generation (Reversals) as a
// watcher would after deep reorganisations.
func (s *invSeq) signalGen(name, txid string, cents int64, reversals int, afterConfirmation bool) {
	s.env.SignalWorkflow(name, s.direct(workflows.PaymentEvent{Network: domain.NetworkBitcoin, Asset: "BTC", TxID: txid,
		AmountBase: "1000", AmountCents: cents, Reversals: reversals, AfterConfirmation: afterConfirmation}))
}

// orderShortfall is orders.shortfall_cents.
func (s *invSeq) orderShortfall() int64 {
	var gap int64
	s.must(s.w.db.GetContext(s.ctx, &gap, `SELECT shortfall_cents FROM orders WHERE ref = $1`, s.ref), "shortfall")
	return gap
}

// A partial payment refunded to the balance, then removed by a deep
// reorganisation: the refund is the reversal's shortfall, not owed again by
// the order (support could attribute 3357 USD cents to a 2357 order, total
// plus the refund; seed 165). Mined again, the payment backs the refund:
// the flag closes and nothing of it is queued as extra.
func TestRefundedPaymentReversedIsShortfallNotOwedAgain(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 4, 0, rtxQuote(1))
	var refund, tooMuch, attributed error = errPending, errPending, errPending
	s.at(time.Minute, "pay 10 USD", func(s *invSeq) { s.confirmDirect("gap1", 1000) })
	s.at(2*time.Minute, "refund it", func(s *invSeq) {
		s.updateExpect(&refund, workflows.UpdateRefund, workflows.Refund{ActionID: 1, Agent: "a", AmountCents: 1000, Reason: "r"})
	})
	s.at(3*time.Minute, "deep reorganisation", func(s *invSeq) { s.signalGen(workflows.SignalPaymentReverted, "gap1", 1000, 1, true) })
	s.at(4*time.Minute, "owed", func(s *invSeq) {
		if q := s.query(); q.status != domain.StatusAwaitingPayment || q.paid != 0 || q.refunded != 1000 || q.refundable != 0 {
			s.fatalf("after the reversal: %+v, want awaiting payment, 0 paid, 1000 refunded, nothing refundable", q)
		}
		if gap := s.orderShortfall(); gap != 1000 {
			s.fatalf("orders.shortfall_cents %d, want 1000", gap)
		}
		es := s.exceptions()
		if len(es) != 1 || es[0].Reason != domain.ExceptionReverted || es[0].ShortfallCents != 1000 {
			s.fatalf("queue: %+v, want one reverted flag with 1000 shortfall", es)
		}
		s.updateExpect(&tooMuch, workflows.UpdateAttributePayment, workflows.Attribution{ActionID: 2, Agent: "a", AmountCents: 2358, Reason: "vu"})
		s.updateExpect(&attributed, workflows.UpdateAttributePayment, workflows.Attribution{ActionID: 3, Agent: "a", AmountCents: 2357, Reason: "vu"})
	})
	s.at(5*time.Minute, "mined again", func(s *invSeq) { s.signalGen(workflows.SignalPaymentConfirmed, "gap1", 1000, 1, false) })
	start()
	if refund != nil || codeOf(tooMuch) != domain.ECodeConflict || attributed != nil {
		t.Fatalf("refund %v; attribution of total + refund %v (want refused); of the total %v", refund, tooMuch, attributed)
	}
	es := s.exceptions()
	if len(es) != 1 || es[0].ShortfallCents != 0 || es[0].Resolution != domain.ResolutionRemined {
		t.Fatalf("queue after the payment came back: %+v, want the flag closed as remined, nothing queued", es)
	}
	if _, paid, refunded := s.orderRow(); paid != 3357 || refunded != 1000 || s.orderShortfall() != 0 {
		t.Fatalf("paid %d refunded %d shortfall %d, want 3357 (2357 attributed + 1000 back), 1000, 0", paid, refunded, s.orderShortfall())
	}
}

// A late payment support counted toward the order, then removed by a deep
// reorganisation: the order no longer counts it (its attribution's counted
// payment had no output index, so the reversal never found it; seed 170).
func TestAttributedLatePaymentReversedIsUncounted(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 5, 0, rtxQuote(1))
	late := workflows.PaymentEvent{Network: domain.NetworkBitcoin, Asset: "BTC", TxID: "late1", Index: 1,
		AmountBase: "1000", AmountCents: 1500, Late: true}
	var counted error = errPending
	s.at(time.Minute, "late payment", func(s *invSeq) { s.env.SignalWorkflow(workflows.SignalPaymentConfirmed, s.direct(late)) })
	s.at(2*time.Minute, "support counts it", func(s *invSeq) {
		es := s.exceptions()
		if len(es) != 1 || es[0].Reason != domain.ExceptionLate {
			s.fatalf("queue: %+v, want the late payment", es)
		}
		s.updateExpect(&counted, workflows.UpdateAttributePayment, workflows.Attribution{ActionID: 1, Agent: "a", Reason: "compté", ExceptionID: es[0].ID})
	})
	s.at(3*time.Minute, "deep reorganisation", func(s *invSeq) {
		r := late
		r.AfterConfirmation, r.Reversals = true, 1
		s.env.SignalWorkflow(workflows.SignalPaymentReverted, s.direct(r))
	})
	s.at(4*time.Minute, "uncounted", func(s *invSeq) {
		if q := s.query(); q.paid != 0 || q.status != domain.StatusAwaitingPayment {
			s.fatalf("after the reversal: %+v, want nothing counted, awaiting payment", q)
		}
		if _, paid, _ := s.orderRow(); paid != 0 {
			s.fatalf("paid_cents %d in PostgreSQL, want 0", paid)
		}
	})
	start()
	if counted != nil {
		t.Fatal(counted)
	}
}

// stateSignal signals one state of payment txid as a watcher would, with
// its state version.
func (s *invSeq) stateSignal(name, txid string, cents int64, version int64) {
	s.env.SignalWorkflow(name, s.direct(workflows.PaymentEvent{Network: domain.NetworkBitcoin, Asset: "BTC", TxID: txid,
		AmountBase: "1000", AmountCents: cents, StateVersion: version}))
}

// A batch of signals is read by kind (seen, confirmed, reverted), not in
// the order sent: with state versions each payment ends in its newest
// state. A payment reverted then seen again in one batch stays detected
// (it used to be dropped, the order showing no payment while one was on
// its way); a stale reversal read after the confirmation writes nothing.
func TestBatchedPaymentStatesAppliedNewestLast(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 6, 0, rtxQuote(1))
	s.at(time.Minute, "seen in the mempool", func(s *invSeq) { s.stateSignal(workflows.SignalPaymentSeen, "rbf1", 2357, 1) })
	s.at(2*time.Minute, "dropped, then back, read in one batch", func(s *invSeq) {
		// The first signal of a batch is read first, the others by kind.
		s.stateSignal(workflows.SignalPaymentConfirmed, "other1", 100, 2)
		s.stateSignal(workflows.SignalPaymentReverted, "rbf1", 2357, 2)
		s.stateSignal(workflows.SignalPaymentSeen, "rbf1", 2357, 3)
	})
	s.at(3*time.Minute, "still detected", func(s *invSeq) {
		if q := s.query(); q.status != domain.StatusPaymentDetected {
			s.fatalf("after reverted+seen in one batch: %s, want payment_detected", q.status)
		}
	})
	s.at(4*time.Minute, "confirmed, with the old reversal re-sent", func(s *invSeq) {
		s.stateSignal(workflows.SignalPaymentConfirmed, "rbf1", 2357, 4)
		s.stateSignal(workflows.SignalPaymentReverted, "rbf1", 2357, 2)
	})
	s.at(5*time.Minute, "paid", func(s *invSeq) {
		if q := s.query(); q.paid != 2457 {
			s.fatalf("paid %d, want 2457", q.paid)
		}
		var n int
		s.must(s.w.db.GetContext(s.ctx, &n, `SELECT count(*) FROM timeline_events WHERE ref = $1 AND kind = $2`,
			s.ref, domain.EventPaymentReverted), "reversals")
		if n != 0 {
			var keys []string
			s.must(s.w.db.SelectContext(s.ctx, &keys, `SELECT idem_key FROM timeline_events WHERE ref = $1 ORDER BY id`, s.ref), "keys")
			s.fatalf("%d reversal events, want none (every reversal here was replaced by a newer state): %v", n, keys)
		}
	})
	start()
}

// balance is the customer's balance, a debt negative.
func (s *invSeq) balance() int64 {
	s.t.Helper()
	b, err := s.w.db.Balance(s.ctx, s.acc)
	s.must(err, "balance")
	return b.AvailableCents - b.DebtCents
}

// A payment refunded to the balance, then removed by a deep
// reorganisation: the refund is taken back from the balance in the
// reversal's transition; mined again, it is given back (issue 36, item 5).
func TestRefundedPaymentReversedIsTakenBackFromTheBalance(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 8, 0, rtxQuote(1))
	var refund error = errPending
	s.at(time.Minute, "pay 10 USD", func(s *invSeq) { s.confirmDirect("back1", 1000) })
	s.at(2*time.Minute, "refund it", func(s *invSeq) {
		s.updateExpect(&refund, workflows.UpdateRefund, workflows.Refund{ActionID: 1, Agent: "a", AmountCents: 1000, Reason: "r"})
	})
	s.at(3*time.Minute, "refunded", func(s *invSeq) {
		if b := s.balance(); b != 1000 {
			s.fatalf("balance after the refund %d, want 1000", b)
		}
	})
	s.at(4*time.Minute, "deep reorganisation", func(s *invSeq) { s.signalGen(workflows.SignalPaymentReverted, "back1", 1000, 1, true) })
	s.at(5*time.Minute, "taken back", func(s *invSeq) {
		if b := s.balance(); b != 0 {
			s.fatalf("balance after the reversal %d, want 0: the refund taken back", b)
		}
		s.checkLedger()
	})
	s.at(6*time.Minute, "mined again", func(s *invSeq) { s.signalGen(workflows.SignalPaymentConfirmed, "back1", 1000, 1, false) })
	s.at(7*time.Minute, "given back", func(s *invSeq) {
		if b := s.balance(); b != 1000 {
			s.fatalf("balance after the payment was mined again %d, want 1000", b)
		}
		s.checkLedger()
	})
	start()
	if refund != nil {
		t.Fatalf("refund: %v", refund)
	}
	// Paid by direct signals (no chain): the ledger's checks, not the
	// money equation against what the chains received.
	s.closed = true
	s.checkLedger()
}

// A credited top-up whose payment a deep reorganisation removes: the
// credit is taken back from the balance (issue 36, item 5).
func TestCreditedTopUpReversedIsTakenBackFromTheBalance(t *testing.T) {
	w := newInvWorld(t)
	s, start := w.newSeq(t, 9, 0, &domain.Quote{})
	s.at(time.Minute, "pay the top-up", func(s *invSeq) { s.confirmDirect("tu1", s.total) })
	s.at(3*time.Minute, "credited", func(s *invSeq) {
		if b := s.balance(); b != s.total {
			s.fatalf("balance after the credit %d, want %d", b, s.total)
		}
	})
	s.at(4*time.Minute, "deep reorganisation", func(s *invSeq) { s.signalGen(workflows.SignalPaymentReverted, "tu1", s.total, 1, true) })
	s.at(5*time.Minute, "taken back", func(s *invSeq) {
		if b := s.balance(); b != 0 {
			s.fatalf("balance after the reversal %d, want 0: the credit taken back", b)
		}
		s.checkLedger()
	})
	start()
	s.closed = true
	s.checkAll()
}
