package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// listenChecked is listenPayments from vDrain. The signals already
// received (at most maxPaymentBatch) are taken together, busy from the
// moment they leave their channels (a run that ended or continued as new
// meanwhile would drop them, the watcher having seen them delivered). They
// are checked in one local activity (activities.CheckPayments) against
// what the watchers recorded and the payment requests they name: only
// money a watcher recorded is counted, a signal sealed and sent by anyone
// else changes nothing. Those admitted are handled under mu with one
// timeline write.
func listenChecked(ctx workflow.Context, run *intakeRun) {
	for {
		first, ok := awaitPaymentSignal(ctx)
		if !ok {
			return
		}
		run.signalsBusy++
		sigs := []paymentSignal{first}
		for len(sigs) < maxPaymentBatch {
			next, ok := receivePendingSignal(ctx, true)
			if !ok {
				break
			}
			sigs = append(sigs, next)
		}
		if admitted := run.checkSignals(ctx, sigs); len(admitted) > 0 {
			if err := run.mu.Lock(ctx); err != nil {
				run.signalsBusy--
				return
			}
			run.batch = true
			for _, sig := range admitted {
				handleSignal(ctx, run, sig)
			}
			run.batch = false
			if err := run.p.flushBatch(ctx); err != nil {
				workflow.GetLogger(ctx).Error("payment signals' timeline write", "error", err)
			}
			run.mu.Unlock()
		}
		run.signalsBusy--
	}
}

// awaitPaymentSignal takes the next payment signal; false once the run's
// context is done. It waits with Await, not a selector: a value a blocked
// selector was handed stays with it, out of its channel's Len, until its
// coroutine runs, and a run ending in that task would not see it
// (signalsPending) and drop it. A payload that cannot be decoded is
// dropped by ReceiveAsync, and the wait starts again.
func awaitPaymentSignal(ctx workflow.Context) (paymentSignal, bool) {
	for {
		if err := workflow.Await(ctx, func() bool { return signalsPending(ctx) }); err != nil {
			return paymentSignal{}, false
		}
		if sig, ok := receivePendingSignal(ctx, true); ok {
			return sig, true
		}
	}
}

// refusedUnrecorded: a payment signal no watcher recorded as it claims.
const refusedUnrecorded = "unrecorded"

// checkSignals returns the signals of a batch the run takes: well formed,
// addressed to this workflow, naming one of its payment requests with
// that request's address, asset and network, and recorded by a watcher as
// claimed. The others are logged and counted (MetricRefusedCalls). The
// check holds the search attributes' upsert back (see admit).
func (i *intakeRun) checkSignals(ctx workflow.Context, sigs []paymentSignal) []paymentSignal {
	var claims []domain.PaymentClaim
	var named []paymentSignal
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	for _, sig := range sigs {
		switch {
		case !wellFormed(sig):
			workflow.GetLogger(ctx).Error("malformed payment signal ignored", "signal", sig.name)
		case sig.target() != id:
			refused(ctx, "signal", sig.name, refusedAddress)
		default:
			claims = append(claims, sig.claim())
			named = append(named, sig)
		}
	}
	if len(claims) == 0 {
		return nil
	}
	var a *activities.Activities
	var checks []domain.PaymentCheck
	err := i.sa.hold(func() error {
		return execLocal(ctx, i.v, localTimelineCtx(ctx, i.v), timelineCtx(ctx), a.CheckPayments, claims, &checks)
	})
	if err != nil || len(checks) != len(claims) {
		workflow.GetLogger(ctx).Error("payment signals not checked", "signals", len(claims), "error", err)
		return nil // the run is cancelled: nothing left to count them toward
	}
	var out []paymentSignal
	for n, sig := range named {
		c := claims[n]
		got := PaymentRequestRef{Address: c.Address, Asset: c.Asset, Network: c.Network}
		switch {
		case !i.st.Payments.ownRequestIn(checks[n].Request, i.kind, i.ref, c.IntentID, got):
			refused(ctx, "signal", sig.name, refusedRequest)
		case !checks[n].Recorded:
			refused(ctx, "signal", sig.name, refusedUnrecorded)
		default:
			out = append(out, sig)
		}
	}
	return out
}

// target is the workflow the signal is addressed to.
func (s paymentSignal) target() string {
	if s.name == SignalPaymentDust {
		return s.dust.Target
	}
	return s.ev.Target
}

// claim is what the signal says of the payment (or dust total).
func (s paymentSignal) claim() domain.PaymentClaim {
	if s.name == SignalPaymentDust {
		return s.dust.Claim()
	}
	return s.ev.Claim()
}

// Claim is what the signal says of the payment, checked against what the
// watchers recorded before anything is counted (vDrain).
func (p PaymentEvent) Claim() domain.PaymentClaim {
	return domain.PaymentClaim{Network: p.Network, TxID: p.TxID, Index: p.Index, Asset: p.Asset, IntentID: p.IntentID,
		Address: p.Address, AmountBase: p.AmountBase, AmountCents: p.AmountCents}
}

// Claim is what the summary says of the request's dust (see
// PaymentEvent.Claim).
func (d DustSummary) Claim() domain.PaymentClaim {
	return domain.PaymentClaim{Network: d.Network, Asset: d.Asset, IntentID: d.IntentID, Address: d.Address,
		AmountBase: d.AmountBase, AmountCents: d.AmountCents, Dust: true, Version: d.Version}
}
