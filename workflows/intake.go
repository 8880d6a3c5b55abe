package workflows

// The payment intake: what a rental's and a top-up's runs keep for it
// alike, and the watchers' signals, read in batches and handed to the
// handlers (payee.go).

import (
	"go.temporal.io/sdk/workflow"
)

// intakeRun is what a rental's or a top-up's run keeps, beside its state,
// for the intake and its continuing as new.
type intakeRun struct {
	mu          workflow.Mutex
	v           workflow.Version // command version (historyVersion)
	sa          searchAttrs
	signalsBusy int      // payment signals being processed
	full        bool     // the history passed its bound: continue as new at the next waiting point
	maxHistory  int      // the history's bound (DefaultMaxHistory)
	updates     int      // updates handled by this run (vDrain)
	works       handOver // the updates' works (vHandOver)
	// onFull wakes a wait of the main flow that does not poll full (the
	// rental's period); nil: none.
	onFull   func()
	batch    bool // payment signals being handled in one batch (vReorgDust): their events wait for one write
	debiting bool // a balance debit is paying the order: no attribution meanwhile
	// kind and ref name the order or top-up, as its payment requests do
	// (domain.TargetOrder or domain.TargetTopUp); amount is its total.
	kind, ref string
	amount    int64
	st        *payeeState // in the payee's state
	p         payee
}

// newIntakeRun starts a run's intake: its mutex, and its command version,
// read once (ceiling: see historyVersion).
func newIntakeRun(ctx workflow.Context, ceiling int, kind, ref string, amount int64, st *payeeState, p payee) intakeRun {
	v := historyVersion(ctx, ceiling)
	return intakeRun{mu: workflow.NewMutex(ctx), v: v, sa: searchAttrs{V: v}, works: handOver{on: v >= vHandOver},
		kind: kind, ref: ref, amount: amount, st: st, p: p}
}

// quiet waits until the updates running and the payment signals being
// handled are done; withPending: and those received but not yet read (a
// run continuing as new leaves none behind; from vDrain, an ending run
// neither).
// From vLeanTasks it then upserts what the search attributes kept: the run
// ends in this task.
func (i *intakeRun) quiet(ctx workflow.Context, withPending bool) error {
	withPending = withPending || i.v >= vDrain
	err := workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) && i.works.idle() && i.signalsBusy == 0 && (!withPending || !signalsPending(ctx))
	})
	if err == nil && i.v >= vLeanTasks {
		i.sa.flush(ctx)
	}
	return err
}

// checkFull notes a history past its bound (from vDrain, or a run past
// maxUpdatesPerRun updates), and wakes the main flow (onFull).
func (i *intakeRun) checkFull(ctx workflow.Context) {
	if i.full || !(historyFull(ctx, i.v, i.maxHistory) || (i.v >= vDrain && i.updates >= maxUpdatesPerRun)) {
		return
	}
	i.full = true
	if i.onFull != nil {
		i.onFull()
	}
}

// over reports, at a waiting point of the main flow, whether the run
// continues as new. From vDrain the wait checks the bound itself, so that
// a run fed only timers, updates or retry markers continues too; before,
// only a batch of payment signals did.
func (i *intakeRun) over(ctx workflow.Context) bool {
	if i.v >= vDrain {
		i.checkFull(ctx)
	}
	return i.full
}

// maxUpdatesPerRun is how many updates a run handles before it continues
// as new (vDrain): well below the server's limit per run (2,000 by
// default), past which every update is refused, support's included.
const maxUpdatesPerRun = 500

// updateCounted wraps an update handler: from vDrain, each update handled counts
// toward the run's bound, checked once it returns; from vHandOver its work
// runs under the run's handOver.
func updateCounted[A any](i *intakeRun, name string, h func(workflow.Context, A) error) func(workflow.Context, A) error {
	return func(ctx workflow.Context, arg A) error {
		defer i.afterUpdate(ctx)
		return i.works.run(ctx, name, func(ctx workflow.Context) error { return h(ctx, arg) })
	}
}

// updateCountedR is updateCounted for a handler with a result.
func updateCountedR[A, R any](i *intakeRun, name string, h func(workflow.Context, A) (R, error)) func(workflow.Context, A) (R, error) {
	return func(ctx workflow.Context, arg A) (R, error) {
		defer i.afterUpdate(ctx)
		var res R
		err := i.works.run(ctx, name, func(ctx workflow.Context) error {
			var err error
			res, err = h(ctx, arg)
			return err
		})
		return res, err
	}
}

func (i *intakeRun) afterUpdate(ctx workflow.Context) {
	if i.v < vDrain {
		return
	}
	i.updates++
	i.checkFull(ctx)
}

// texts are the words of the payee's kind.
func (i *intakeRun) texts() *payeeText { return payeeTexts[i.kind] }

// payeeState is the part of a rental's or a top-up's state the intake
// keeps (embedded: its JSON names are theirs).
type payeeState struct {
	Payments *paymentLedger
	Actions  map[int64]bool // support actions applied: a re-sent update is a no-op
	// Counted are the received payments counted toward the amount: they
	// go back to support's queue if the order or top-up expires unpaid.
	Counted []countedPayment
}

// timeline keeps the events of a batch (and the rental's writeLater) for
// one write.
type timeline[E any] struct {
	later []E
}

// write writes ev after the events kept, or keeps it while a batch runs.
func (tl *timeline[E]) write(ctx workflow.Context, v workflow.Version, batch bool, one, many any, ev E) error {
	if batch {
		tl.later = append(tl.later, ev)
		return nil
	}
	if len(tl.later) == 0 {
		return execTimeline(ctx, v, one, ev)
	}
	evs := append(tl.later, ev)
	tl.later = nil
	return execTimeline(ctx, v, many, evs)
}

// flush writes the events kept in one local activity.
func (tl *timeline[E]) flush(ctx workflow.Context, v workflow.Version, many any) error {
	if len(tl.later) == 0 {
		return nil
	}
	evs := tl.later
	tl.later = nil
	return execTimeline(ctx, v, many, evs)
}

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

// admit reports whether the run takes sig (admitted). From vStartInSync
// the check holds the search attributes' upsert back: looking up a
// payment request the run does not know yet is a local activity, and the
// signal, taken from its channel but not yet handled, would otherwise let
// sync upsert a status it is about to change, then again in the same task.
func admit(ctx workflow.Context, run *intakeRun, sig paymentSignal) bool {
	if run.v < vStartInSync {
		return admitted(ctx, run.v, run, sig)
	}
	ok := false
	_ = run.sa.hold(func() error {
		ok = admitted(ctx, run.v, run, sig)
		return nil
	})
	return ok
}

// maxPaymentBatch bounds the signals handled in one batch (and so the size
// of its one timeline write).
const maxPaymentBatch = 100

// listenPayments handles the chain watchers' signals for the run's life,
// under its mu; signalsBusy counts the handlers running, so the
// workflow returns only after them. From vReorgDust on, the signals already
// received are handled together with one timeline write, whatever payers
// send (dust summaries included); before, one by one. Within a batch the
// signals are taken by kind (seen, confirmed, reverted, dust), as the
// selector does.
func listenPayments(ctx workflow.Context, run *intakeRun) {
	v, mu, busy := run.v, run.mu, &run.signalsBusy
	if v >= vDrain {
		listenChecked(ctx, run)
		return
	}
	batching := v >= vReorgDust
	for {
		sig := receivePaymentSignal(ctx, batching)
		if ctx.Err() != nil {
			return
		}
		if !takes(ctx, run, sig) {
			continue
		}
		*busy++
		if err := mu.Lock(ctx); err != nil {
			*busy--
			return
		}
		if !batching {
			handleSignal(ctx, run, sig)
		} else {
			run.batch = true
			handleSignal(ctx, run, sig)
			for n := 1; n < maxPaymentBatch; n++ {
				next, ok := receivePendingSignal(ctx, true)
				if !ok {
					break
				}
				if takes(ctx, run, next) {
					handleSignal(ctx, run, next)
				}
			}
			run.batch = false
			if err := run.p.flushBatch(ctx); err != nil {
				workflow.GetLogger(ctx).Error("payment signals' timeline write", "error", err)
			}
		}
		mu.Unlock()
		*busy--
	}
}

// handleSignal applies one admitted signal; the caller holds mu.
func handleSignal(ctx workflow.Context, run *intakeRun, sig paymentSignal) {
	if run.v >= vStateOrder && sig.name != SignalPaymentDust && run.st.Payments.stale(sig.ev) {
		// A state the watcher replaced before this one was read (a
		// batch is read by kind): the newer one is, or was, applied.
		return
	}
	var err error
	switch sig.name {
	case SignalPaymentSeen:
		err = onSeen(ctx, run, sig.ev)
	case SignalPaymentConfirmed:
		err = onConfirmed(ctx, run, sig.ev)
	case SignalPaymentReverted:
		err = onReverted(ctx, run, sig.ev)
	case SignalPaymentDust:
		err = onDust(ctx, run, sig.dust)
	}
	if err != nil {
		workflow.GetLogger(ctx).Error("payment signal", "signal", sig.name, "key", sig.ev.Key(), "error", err)
	}
}

// takes reports whether the run handles sig: well formed and admitted.
func takes(ctx workflow.Context, run *intakeRun, sig paymentSignal) bool {
	if !wellFormed(sig) {
		workflow.GetLogger(ctx).Error("malformed payment signal ignored", "signal", sig.name)
		return false
	}
	return admit(ctx, run, sig)
}

func wellFormed(sig paymentSignal) bool {
	if sig.name == SignalPaymentDust {
		return sig.dust.IntentID != "" && sig.dust.Network != ""
	}
	return sig.ev.Network != "" && sig.ev.TxID != ""
}
