package chainwatch

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// ErrWorkflowClosed is returned by a Signaler when the target workflow no
// longer runs.
var ErrWorkflowClosed = errors.New("workflow closed")

// Signaler delivers a payment's state to its order's or top-up's workflow.
type Signaler interface {
	Signal(ctx context.Context, p Pending) error
	SignalDust(ctx context.Context, d DustPending) error
}

// TemporalSignaler signals workflows through the Temporal client.
type TemporalSignaler struct {
	Client client.Client
}

func workflowID(kind, ref string) string {
	switch kind {
	case domain.TargetTopUp:
		return workflows.TopUpWorkflowID(ref)
	case domain.TargetPayout:
		return workflows.PayoutWorkflowID(ref)
	}
	return workflows.RentalWorkflowID(ref)
}

func (s TemporalSignaler) send(ctx context.Context, wid, name string, payload any) error {
	err := s.Client.SignalWorkflow(ctx, wid, "", name, payload)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%s: %w", wid, ErrWorkflowClosed)
	}
	return err
}

// SignalDust sends a request's dust summary.
func (s TemporalSignaler) SignalDust(ctx context.Context, d DustPending) error {
	wid := workflowID(d.TargetKind, d.TargetRef)
	return s.send(ctx, wid, workflows.SignalPaymentDust, workflows.DustSummary{
		Addressed: domain.Addressed{Target: wid}, Address: d.Address,
		Network: d.Network, Asset: d.Asset, IntentID: d.IntentID, Version: d.Version,
		Outputs: d.Outputs, AmountBase: d.AmountBase, AmountCents: d.AmountCents,
	})
}

// Signal sends the signal matching p.State.
func (s TemporalSignaler) Signal(ctx context.Context, p Pending) error {
	name := map[string]string{
		StateSeen:      workflows.SignalPaymentSeen,
		StateConfirmed: workflows.SignalPaymentConfirmed,
		StateReverted:  workflows.SignalPaymentReverted,
	}[p.State]
	if name == "" {
		return fmt.Errorf("unknown payment state %q", p.State)
	}
	return s.send(ctx, workflowID(p.TargetKind, p.TargetRef), name, PaymentEvent(p))
}

// PaymentEvent is the signal payload for a stored payment, addressed to
// its order's or top-up's workflow and naming its payment request.
func PaymentEvent(p Pending) workflows.PaymentEvent {
	return workflows.PaymentEvent{
		Addressed:   domain.Addressed{Target: workflowID(p.TargetKind, p.TargetRef)},
		Address:     p.Address,
		Network:     p.Network,
		Asset:       p.Asset,
		TxID:        p.TxID,
		Index:       p.Index,
		AmountBase:  p.AmountBase,
		AmountCents: p.AmountCents,
		IntentID:    p.IntentID,
		Late:        p.Late,

		Mempool:           p.Mempool,
		AfterConfirmation: p.AfterConfirmation && p.State == StateReverted,
		Reversals:         p.Reversals,
		StateVersion:      p.StateVersion,
	}
}
