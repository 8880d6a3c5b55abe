package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// PayoutWorkflowType is the payout batch workflow's registered name.
const PayoutWorkflowType = "PayoutBatchWorkflow"

// SignalPayoutBatch tells a batch's workflow that its batch changed in the
// store (BatchNews): signed, or voided by a customer's cancel.
const SignalPayoutBatch = "payout-batch"

// PayoutSettle is how long a batch's workflow keeps listening once every
// payout is done, for a reorganisation to put one back; after that the
// chain's news is applied by the watchers themselves
// (postgres.MarkUndeliverable).
const PayoutSettle = 24 * time.Hour

// PayoutInput names the batch.
type PayoutInput struct {
	BatchRef string
	// Done: every payout was done when the run before continued as new.
	Done bool
}

// PayoutWorkflowID is the workflow of a payout batch.
func PayoutWorkflowID(batchRef string) string { return domain.PayoutWorkflowID(batchRef) }

// AddressedTo is the workflow a start input is for.
func (in PayoutInput) AddressedTo() string { return PayoutWorkflowID(in.BatchRef) }

// BatchNews is SignalPayoutBatch's payload.
type BatchNews struct {
	domain.Addressed
	Voided bool
}

// payoutSignals are the watchers' signals and the state each one carries.
var payoutSignals = []struct{ name, state string }{
	{SignalPaymentSeen, domain.PaymentStateSeen},
	{SignalPaymentConfirmed, domain.PaymentStateConfirmed},
	{SignalPaymentReverted, domain.PaymentStateReverted},
}

// PayoutWorkflow follows one payout batch from its export to the chain's
// confirmation of every payout in it. The store is the record (the
// payouts' statuses and timelines, the ledger); the workflow is the one
// place the watchers' news of the batch goes, applied in the order it
// came, each once. It ends when the batch is voided, or PayoutSettle after
// its last payout is done; it continues as new, with nothing left unread,
// when its history grows.
func PayoutWorkflow(ctx workflow.Context, in PayoutInput) error {
	actx := timelineCtx(ctx)
	type news struct {
		state string
		ev    PaymentEvent
	}
	var (
		queue  []news
		voided bool
		done   = in.Done
	)
	chans := make([]workflow.ReceiveChannel, len(payoutSignals))
	for i, s := range payoutSignals {
		chans[i] = workflow.GetSignalChannel(ctx, s.name)
	}
	batch := workflow.GetSignalChannel(ctx, SignalPayoutBatch)
	// drain reads whatever was delivered and not read yet.
	drain := func() {
		for i, c := range chans {
			var ev PaymentEvent
			for c.ReceiveAsync(&ev) {
				queue = append(queue, news{payoutSignals[i].state, ev})
			}
		}
		var b BatchNews
		for batch.ReceiveAsync(&b) {
			voided = voided || b.Voided
		}
	}
	apply := func() error {
		for len(queue) > 0 {
			n := queue[0]
			var all bool
			if err := workflow.ExecuteActivity(actx, (*activities.Activities).PayoutChainState, activities.PayoutChainInput{
				IntentID: n.ev.IntentID, State: n.state, TxID: n.ev.TxID}).Get(ctx, &all); err != nil {
				return err
			}
			done = all
			queue = queue[1:]
		}
		return nil
	}
	for {
		settled := false
		sel := workflow.NewSelector(ctx)
		for i, c := range chans {
			state := payoutSignals[i].state
			sel.AddReceive(c, func(c workflow.ReceiveChannel, _ bool) {
				var ev PaymentEvent
				c.Receive(ctx, &ev)
				queue = append(queue, news{state, ev})
			})
		}
		sel.AddReceive(batch, func(c workflow.ReceiveChannel, _ bool) {
			var b BatchNews
			c.Receive(ctx, &b)
			voided = voided || b.Voided
		})
		tctx, cancel := workflow.WithCancel(ctx)
		if done {
			sel.AddFuture(workflow.NewTimer(tctx, PayoutSettle), func(workflow.Future) { settled = true })
		}
		sel.Select(ctx)
		cancel()
		drain()
		if err := apply(); err != nil {
			return err
		}
		switch {
		case voided && !done:
			return nil
		case settled && done:
			return nil
		case workflow.GetInfo(ctx).GetContinueAsNewSuggested():
			drain()
			if err := apply(); err != nil {
				return err
			}
			in.Done = done
			return workflow.NewContinueAsNewError(ctx, PayoutWorkflowType, in)
		}
	}
}
