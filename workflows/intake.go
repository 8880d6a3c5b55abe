package workflows

// The payment intake: the watchers' signals, read in batches and handed
// to the rental or top-up they are addressed to.

import (
	"go.temporal.io/sdk/workflow"
)

// paymentSignal is one signal received from a chain watcher.
type paymentSignal struct {
	name string // SignalPayment*
	ev   PaymentEvent
	dust DustSummary // SignalPaymentDust
}

// paymentSignalNames are the watchers' signals in their natural order;
// withDust adds the dust summaries (vReorgDust: older workflows never read
// them).
func paymentSignalNames(withDust bool) []string {
	names := []string{SignalPaymentSeen, SignalPaymentConfirmed, SignalPaymentReverted}
	if withDust {
		names = append(names, SignalPaymentDust)
	}
	return names
}

func (s *paymentSignal) receiveAsync(c workflow.ReceiveChannel, name string) bool {
	s.name = name
	if name == SignalPaymentDust {
		return c.ReceiveAsync(&s.dust)
	}
	return c.ReceiveAsync(&s.ev)
}

// receivePendingSignal takes a payment signal already received, if any,
// without blocking.
func receivePendingSignal(ctx workflow.Context, withDust bool) (paymentSignal, bool) {
	var got paymentSignal
	for _, name := range paymentSignalNames(withDust) {
		if got.receiveAsync(workflow.GetSignalChannel(ctx, name), name) {
			return got, true
		}
	}
	return got, false
}

// receivePaymentSignal blocks until one of the three payment signals arrives.
// Seen is listed before confirmed and confirmed before reverted so that,
// within one workflow task, they are taken in their natural order.
//
// A signal whose payload cannot be decoded (unsealed: sent without the
// keyring, see package codec) is dropped by the SDK, which logs it and counts
// it in corrupted_signals. ReceiveAsync, not Receive, so that dropping it
// leaves this loop waiting on every channel again instead of blocking on the
// forged one's channel alone.
func receivePaymentSignal(ctx workflow.Context, withDust bool) paymentSignal {
	var got paymentSignal
	ok := false
	sel := workflow.NewSelector(ctx)
	for _, name := range paymentSignalNames(withDust) {
		sel.AddReceive(workflow.GetSignalChannel(ctx, name), func(c workflow.ReceiveChannel, _ bool) {
			ok = got.receiveAsync(c, name)
		})
	}
	for !ok && ctx.Err() == nil {
		sel.Select(ctx)
	}
	return got
}

// maxPaymentBatch bounds the signals handled in one batch (and so the size
// of its one timeline write).
const maxPaymentBatch = 100

// listenPayments handles the chain watchers' signals for the payee's
// life, under its mu; signalsBusy counts the handlers running, so the
// workflow returns only after them. From vReorgDust on, the signals already
// received are handled together with one timeline write, whatever payers
// send (dust summaries included); before, one by one. Within a batch the
// signals are taken by kind (seen, confirmed, reverted, dust), as the
// selector does.
func listenPayments(ctx workflow.Context, t payee) {
	run := t.intake()
	v, mu, busy := run.v, run.mu, &run.signalsBusy
	batching := v >= vReorgDust
	handle := func(sig paymentSignal) {
		if v >= vStateOrder && sig.name != SignalPaymentDust && t.ledger().stale(sig.ev) {
			// A state the watcher replaced before this one was read (a
			// batch is read by kind): the newer one is, or was, applied.
			return
		}
		var err error
		switch sig.name {
		case SignalPaymentSeen:
			err = onSeen(ctx, t, sig.ev)
		case SignalPaymentConfirmed:
			err = onConfirmed(ctx, t, sig.ev)
		case SignalPaymentReverted:
			err = onReverted(ctx, t, sig.ev)
		case SignalPaymentDust:
			err = onDust(ctx, t, sig.dust)
		}
		if err != nil {
			workflow.GetLogger(ctx).Error("payment signal", "signal", sig.name, "key", sig.ev.Key(), "error", err)
		}
	}
	for {
		sig := receivePaymentSignal(ctx, batching)
		if ctx.Err() != nil {
			return
		}
		if !wellFormed(sig) {
			workflow.GetLogger(ctx).Error("malformed payment signal ignored", "signal", sig.name)
			continue
		}
		if !admitted(ctx, v, t, sig) {
			continue
		}
		*busy++
		if err := mu.Lock(ctx); err != nil {
			*busy--
			return
		}
		if !batching {
			handle(sig)
		} else {
			t.startBatch()
			handle(sig)
			for n := 1; n < maxPaymentBatch; n++ {
				next, ok := receivePendingSignal(ctx, true)
				if !ok {
					break
				}
				if wellFormed(next) && admitted(ctx, v, t, next) {
					handle(next)
				}
			}
			if err := t.flushBatch(ctx); err != nil {
				workflow.GetLogger(ctx).Error("payment signals' timeline write", "error", err)
			}
		}
		mu.Unlock()
		*busy--
	}
}

func wellFormed(sig paymentSignal) bool {
	if sig.name == SignalPaymentDust {
		return sig.dust.IntentID != "" && sig.dust.Network != ""
	}
	return sig.ev.Network != "" && sig.ev.TxID != ""
}
