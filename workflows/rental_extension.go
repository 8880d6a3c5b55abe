package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// A customer's extension of their own rental (vExtension): the extend
// update with the customer's extension (Extension.ByCustomer), asked by
// the API for a balance payment, or by the top-up that took its crypto
// payment once credited (activities.ApplyPaidExtension). One activity
// checks and reserves the added days on the same machine, debits the
// balance and writes the order's event with its new end, in one
// transaction (postgres.Extensions.PayExtension); the end, the reminders
// and the timeline then follow as for support's extension. It is
// recorded as the customer's: no support action, no agent.

// validateCustomerExtend: a run from before vExtension refuses; an
// extension already handled is accepted again (a retry); else the rental
// must be paid or active and not ending.
func (r *rental) validateCustomerExtend(e Extension) error {
	if r.v < vExtension {
		return reject(domain.ECodeConflict, "Cette location ne peut pas être prolongée depuis votre espace : contactez le support.")
	}
	if r.Extended[e.ExtensionRef] {
		return nil
	}
	switch r.phase() {
	case PhasePaid, PhaseProvisioning:
		if !r.closingRefund {
			return nil
		}
	case PhaseActive:
		if !r.EndAsked {
			return nil
		}
	}
	return refusal(domain.ErrNotExtendable)
}

// extendByCustomer pays and applies the customer's extension; the caller
// holds mu and validated it. A balance extension the store refuses
// (machine not free, balance short) changes nothing and the update says
// why; a crypto one that can no longer be applied lapses, its reason on
// the timeline and the money on the balance.
func (r *rental) extendByCustomer(ctx workflow.Context, e Extension) error {
	if r.Extended[e.ExtensionRef] {
		return nil
	}
	var a *activities.Activities
	in := domain.ExtensionPayment{
		ExtensionNew: domain.ExtensionNew{Ref: e.ExtensionRef, OrderRef: r.in.OrderRef, AccountID: r.in.AccountID,
			Days: e.Days, Method: e.Method, AmountCents: e.AmountCents},
		At: workflow.Now(ctx).UTC(),
	}
	active := r.phase() == PhaseActive
	end := r.End.Add(time.Duration(e.Days) * r.cfg.Day)
	if active {
		in.PeriodEnd = ptrTo(end)
	}
	in.Message = domain.ExtensionMessage(e.Days, e.AmountCents, in.PeriodEnd, e.Method)
	var out domain.ExtensionOutcome
	// The phase stays; the event writes it again with the debit.
	err := r.transitionOnWrite(ctx, r.phase(), func(status string) error {
		in.Status = status
		return workflow.ExecuteActivity(timelineCtx(ctx), a.PayExtension, in).Get(ctx, &out)
	})
	if err != nil {
		return asRefusal(err, "La prolongation n'a pas abouti : rien n'a été débité. Réessayez plus tard.")
	}
	if r.Extended == nil {
		r.Extended = map[string]bool{}
	}
	r.Extended[e.ExtensionRef] = true
	if !out.Paid {
		return nil
	}
	if active {
		r.End = end
		r.Status.PeriodEnd = end
		r.wake.SendAsync(struct{}{}) // re-arm the end and reminder timers
	} else {
		r.ExtraDays += e.Days
	}
	return nil
}
