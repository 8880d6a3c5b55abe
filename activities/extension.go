package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
)

// ExtensionStore keeps customers' extensions of their rentals
// (postgres.Extensions).
type ExtensionStore interface {
	// PayExtension pays an extension from the balance and applies it to
	// the order in one transaction (domain.ExtensionPayment).
	PayExtension(ctx context.Context, in domain.ExtensionPayment) (domain.ExtensionOutcome, error)
	// LapseExtension lapses a reserved extension with reason.
	LapseExtension(ctx context.Context, ref string, accountID int64, reason string, at time.Time) error
	Extension(ctx context.Context, ref string, accountID int64) (domain.RentalExtension, error)
}

// RentalExtender asks a rental's workflow to apply a customer's extension
// (its extend update; wfclient.Client).
type RentalExtender interface {
	Extend(ctx context.Context, orderRef string, e domain.Extension) error
}

// ExtensionApply names the extension a credited top-up paid.
type ExtensionApply struct {
	ExtensionRef string
	OrderRef     string
	AccountID    int64
}

var errNoExtensions = temporal.NewNonRetryableApplicationError(
	"Les prolongations ne sont pas disponibles.", domain.ECodeUnavailable, nil)

// PayExtension pays a customer's extension from the balance and applies
// it to the order (one transaction). A balance extension that cannot be
// paid is refused (not retried); a crypto one lapses instead.
func (a *Activities) PayExtension(ctx context.Context, in domain.ExtensionPayment) (domain.ExtensionOutcome, error) {
	if a.Extensions == nil {
		return domain.ExtensionOutcome{}, errNoExtensions
	}
	out, err := a.Extensions.PayExtension(ctx, in)
	return out, domainToApplication(err)
}

// ApplyPaidExtension asks the rental's workflow to apply the extension a
// top-up just credited the balance for (write first: the credit is
// committed; signal second: the update, retried until the workflow
// answers). The workflow pays and applies it, or lapses it; a workflow
// that is over, or refuses, leaves it lapsed here with its reason: the
// money stays on the balance.
func (a *Activities) ApplyPaidExtension(ctx context.Context, in ExtensionApply) error {
	if a.Extensions == nil || a.Rentals == nil {
		return errNoExtensions
	}
	e, err := a.Extensions.Extension(ctx, in.ExtensionRef, in.AccountID)
	if err != nil || e.State != domain.ExtensionReserved {
		return domainToApplication(err)
	}
	err = a.Rentals.Extend(ctx, in.OrderRef, domain.Extension{
		ExtensionRef: e.Ref, Days: e.Days, Method: domain.ExtensionByCrypto, AmountCents: e.AmountCents,
	})
	if err == nil || !refused(err) || errors.Is(err, context.Canceled) {
		return err
	}
	if code := domain.ErrorCode(err); code == domain.ECodeInProgress {
		return err // accepted: the next attempt finds it done
	}
	reason := "la location ne peut plus être prolongée : " + domain.ErrorMessage(err)
	return domainToApplication(a.Extensions.LapseExtension(ctx, e.Ref, e.AccountID, reason, a.now().UTC()))
}
