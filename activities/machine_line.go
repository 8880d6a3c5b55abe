package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
)

// ErrTypeNotServed is AwaitMachine's retryable error while a paid order
// waits in line.
const ErrTypeNotServed = "not_served_yet"

// TakeMachine reserves the paid order's machine if one is free for it:
// its hold's, or a free one that the paid orders waiting ahead leave over
// (the provisioner's Reserve). taken is false when none is: the order
// waits in line. A second call for an order that has its machine is a
// no-op that says taken.
func (a *Activities) TakeMachine(ctx context.Context, in ReserveInput) (taken bool, err error) {
	err = a.Provisioner.Reserve(ctx, in)
	var de *domain.Error
	if errors.As(err, &de) && de.Code == domain.ECodeNoCapacity {
		return false, nil
	}
	return err == nil, domainToApplication(err)
}

// AwaitMachine is TakeMachine until it takes: while the order waits, each
// attempt fails with a retryable ErrTypeNotServed, which the activity's
// retry policy repeats. Failed attempts write nothing to the workflow's
// history, so a paid order may wait for days at no cost to it; the
// workflow cancels the activity when the order leaves the line.
func (a *Activities) AwaitMachine(ctx context.Context, in ReserveInput) error {
	taken, err := a.TakeMachine(ctx, in)
	if err != nil {
		return err
	}
	if !taken {
		return temporal.NewApplicationError("no machine free for the order yet", ErrTypeNotServed)
	}
	return nil
}
