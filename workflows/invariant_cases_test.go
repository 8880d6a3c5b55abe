package workflows_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/kernodeck/kernodeck/domain"
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

// confirmDirect signals a confirmed payment as a watcher would.
func (s *invSeq) confirmDirect(txid string, cents int64) {
	s.env.SignalWorkflow(workflows.SignalPaymentConfirmed, workflows.PaymentEvent{Network: domain.NetworkBitcoin, Asset: "BTC",
		TxID: txid, AmountBase: "1000", AmountCents: cents, IntentID: "PI-TEST"})
}

// updateExpect sends an update and records its error (nil when accepted).
func (s *invSeq) updateExpect(got *error, name string, args ...any) {
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

// An order paid by a support attribution alone whose provisioning fails has
// nothing to refund: support cancels it (it used to stay open forever).
func TestProvisioningFailedWithNothingRefundableCancelledBySupport(t *testing.T) {
	w := newInvWorld(t)
	q := &domain.Quote{Configuration: domain.Configuration{Model: "mi210", Lots: 10, DurationDays: 3, Preset: "python"},
		GPUsPerLot: 1, TotalGPUs: 10, LotCents: 7490, TotalCents: 74900}
	s, start := w.newSeq(t, 3, 0, q)
	var attributed, refund, cancel error = errPending, errPending, errPending
	s.at(time.Minute, "attribute", func(s *invSeq) {
		s.updateExpect(&attributed, workflows.UpdateAttributePayment, workflows.Attribution{ActionID: 1, Agent: "a", Reason: "vu"})
	})
	s.at(time.Hour, "close", func(s *invSeq) {
		if st := s.query().status; st != domain.StatusProvisioningFailed {
			s.fatalf("status %s, want provisioning_failed", st)
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
			s.env.SignalWorkflow(workflows.SignalPaymentDust, workflows.DustSummary{Network: domain.NetworkBitcoin, Asset: "BTC",
				IntentID: "PI-TEST", Version: version, Outputs: version % 2, AmountBase: "69", AmountCents: cents})
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
