package chainwatch

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/workflows"
)

// ErrWorkflowClosed is returned by a Signaler when the target workflow no
// longer runs.
var ErrWorkflowClosed = errors.New("workflow closed")

// Signaler delivers a payment's state to its order's or top-up's workflow.
type Signaler interface {
	Signal(ctx context.Context, p Pending) error
}

// TemporalSignaler signals workflows through the Temporal client.
type TemporalSignaler struct {
	Client client.Client
}

// Signal sends the signal matching p.State.
func (s TemporalSignaler) Signal(ctx context.Context, p Pending) error {
	wid := workflows.RentalWorkflowID(p.TargetRef)
	if p.TargetKind == "topup" {
		wid = workflows.TopUpWorkflowID(p.TargetRef)
	}
	name := map[string]string{
		StateSeen:      workflows.SignalPaymentSeen,
		StateConfirmed: workflows.SignalPaymentConfirmed,
		StateReverted:  workflows.SignalPaymentReverted,
	}[p.State]
	if name == "" {
		return fmt.Errorf("unknown payment state %q", p.State)
	}
	err := s.Client.SignalWorkflow(ctx, wid, "", name, PaymentEvent(p))
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%s: %w", wid, ErrWorkflowClosed)
	}
	return err
}

// PaymentEvent is the signal payload for a stored payment.
func PaymentEvent(p Pending) workflows.PaymentEvent {
	return workflows.PaymentEvent{
		Network:     p.Network,
		Asset:       p.Asset,
		TxID:        p.TxID,
		Index:       p.Index,
		AmountBase:  p.AmountBase,
		AmountCents: p.AmountCents,
		IntentID:    p.IntentID,
		Late:        p.Late,
	}
}
