// Package activities holds every side effect of the workflows. Each activity
// is idempotent: the workflow derives a key (order reference + step, payment
// key, support action ID) and the store applies a keyed write once.
package activities

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/domain"
)

// Store is the persistence the activities need (implemented by package postgres).
type Store interface {
	// RecordOrderEvent applies one transition of an order (event, order
	// changes, ledger posting, queued amounts) in one transaction, once per
	// (OrderRef, Key); a refusal is a domain error and writes nothing.
	RecordOrderEvent(ctx context.Context, ev OrderEvent) error
	// RecordOrderEventsTogether applies several transitions of an order,
	// in their order, in one transaction: all of them or none.
	RecordOrderEventsTogether(ctx context.Context, evs ...OrderEvent) error
	// RecordTopUpEvent does the same for a top-up.
	RecordTopUpEvent(ctx context.Context, ev TopUpEvent) error
	// PayOrderFromBalance is the "paid" transition of an order paid from the
	// balance; domain error ECodeInsufficient if the balance is short.
	PayOrderFromBalance(ctx context.Context, in PayFromBalanceInput) error
	// CreditTopUp is the "credited" transition of a covered top-up.
	CreditTopUp(ctx context.Context, in CreditTopUpInput) error
	// RefundToBalance posts a refund of rentals started before refunds were
	// one transition.
	RefundToBalance(ctx context.Context, in RefundInput) error
	// Exception returns one received amount of support's queue.
	Exception(ctx context.Context, id int64) (domain.Exception, error)
	// SupportAction returns one audited support action.
	SupportAction(ctx context.Context, id int64) (domain.SupportAction, error)
	// Intent returns one payment request.
	Intent(ctx context.Context, id string) (domain.Intent, error)
	// CheckPayments checks watcher signals' claims against what the
	// watchers recorded (postgres.DB.CheckPayments).
	CheckPayments(ctx context.Context, claims []domain.PaymentClaim) ([]domain.PaymentCheck, error)
}

// Provisioner is a machine driver: it reserves, prepares, verifies, opens and
// closes access to GPU capacity. Every method is idempotent per order.
type Provisioner interface {
	Reserve(ctx context.Context, in ReserveInput) error
	Prepare(ctx context.Context, in PrepareInput) error
	Verify(ctx context.Context, in VerifyInput) (Verification, error)
	CreateAccess(ctx context.Context, in CreateAccessInput) (AccessSummary, error)
	RevokeAccess(ctx context.Context, orderRef string) error
	Release(ctx context.Context, orderRef string) error
}

// IntentCreator creates payment requests (package payments).
type IntentCreator interface {
	CreateIntent(ctx context.Context, in CreateIntentInput) (domain.Intent, error)
}

// CreateIntentInput asks for a payment request for what is still due.
type CreateIntentInput struct {
	TargetKind string // "order" or "topup"
	TargetRef  string
	AccountID  int64
	Asset      string
	Network    string
	USDCents   int64
	RequestKey string // derived in the workflow: a retry finds the same request
	// NotAfter is the end of the order's or top-up's payment window: the
	// request's deadline never passes it (zero: no bound, older workflows).
	NotAfter time.Time
}

// CapacityHolder holds capacity for an order before money is asked for it
// (postgres.Capacity): HoldCapacity (a balance payment) is refused with
// no_capacity when nothing is free. HoldForRequest, for a payment request,
// holds only when the rules on unpaid holds allow it and otherwise lets the
// request be made without a hold (the decision says why); it is refused
// with no_capacity only when everything is rented or held by payers.
type CapacityHolder interface {
	HoldCapacity(ctx context.Context, orderRef string, until time.Time) (taken bool, err error)
	HoldForRequest(ctx context.Context, orderRef string, until time.Time) (domain.HoldDecision, error)
	ReleaseHold(ctx context.Context, orderRef string) error
}

// capacityHoldFirst is how long a hold lasts before the balance payment it
// precedes marks the order paid.
const capacityHoldFirst = 15 * time.Minute

// Activities holds the activities' dependencies. Register a *Activities with
// the worker; workflows call its methods by reference.
type Activities struct {
	Store       Store
	Provisioner Provisioner
	Payments    IntentCreator
	// Capacity, when set, is held before an order's payment request or
	// balance payment, which are refused when nothing is free.
	Capacity CapacityHolder
	// HoldFirst is how long a payment request's hold lasts until a payment
	// to it is seen (the chain watcher then extends it to the request's
	// deadline): a request that costs nothing holds a host briefly
	// (0: domain.DefaultHoldFirst).
	HoldFirst time.Duration
	// Extensions, when set, pays and applies customers' extensions of
	// their rentals; Rentals asks a rental's workflow to apply one its
	// crypto payment paid (both nil: none is offered).
	Extensions ExtensionStore
	Rentals    RentalExtender
	// Payouts applies the chain's news of payouts to their batches.
	Payouts PayoutChain
	// Now is the clock the holds are timed by (nil: time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Activities) holdFirst() time.Duration {
	if a.HoldFirst > 0 {
		return a.HoldFirst
	}
	return domain.DefaultHoldFirst
}

// The transitions and inputs are domain types: the store speaks them too.
type (
	OrderEvent          = domain.OrderEvent
	TopUpEvent          = domain.TopUpEvent
	PayFromBalanceInput = domain.PayFromBalanceInput
	CreditTopUpInput    = domain.CreditTopUpInput
	RefundInput         = domain.RefundInput
)

// ReserveInput reserves capacity for an order.
type ReserveInput struct {
	OrderRef string
	GPUModel string
	GPUs     int
}

// PrepareInput prepares the preset on the reserved machine.
type PrepareInput struct {
	OrderRef string
	Preset   string
}

// VerifyInput is what the machine must show.
type VerifyInput struct {
	OrderRef string
	GPUModel string
	GPUs     int
}

// Verification is what was actually seen on the machine.
type Verification struct {
	GPUModel      string
	GPUCount      int
	DriverVersion string
	CUDAVersion   string
	Notes         string
}

// CreateAccessInput creates the customer's credentials.
type CreateAccessInput struct {
	OrderRef     string
	Verification Verification
}

// AccessSummary is the non-secret part of the access, safe in workflow
// history. Secrets stay in the database, shown to the order's owner only.
type AccessSummary struct {
	Host     string
	Port     int
	Username string
}

// Error types carried by non-retryable application errors, so workflows and
// the API can tell them apart.
const (
	ErrTypeVerifyMismatch = "verify_mismatch"
)

// domainToApplication turns a domain error into a non-retryable application
// error keeping its code and message; other errors stay retryable.
func domainToApplication(err error) error {
	var de *domain.Error
	if refused(err) {
		errors.As(err, &de)
		return temporal.NewNonRetryableApplicationError(de.Message, de.Code, nil)
	}
	return err
}

// RecordOrderEvent applies one transition of an order; a domain refusal
// (balance short, queued amount already settled) is not retried.
func (a *Activities) RecordOrderEvent(ctx context.Context, ev OrderEvent) error {
	return domainToApplication(a.Store.RecordOrderEvent(ctx, ev))
}

// RecordTopUpEvent applies one transition of a top-up.
func (a *Activities) RecordTopUpEvent(ctx context.Context, ev TopUpEvent) error {
	return domainToApplication(a.Store.RecordTopUpEvent(ctx, ev))
}

// LoadException reads one received amount of support's queue.
func (a *Activities) LoadException(ctx context.Context, id int64) (domain.Exception, error) {
	e, err := a.Store.Exception(ctx, id)
	return e, domainToApplication(err)
}

// CheckSupportAction refuses (non-retryable, domain code invalid) a support
// update whose support_actions row is missing or is not the claimed action.
func (a *Activities) CheckSupportAction(ctx context.Context, c domain.SupportActionClaim) error {
	row, err := a.Store.SupportAction(ctx, c.ID)
	if errors.Is(err, domain.ErrNotFound) {
		err = domain.Errorf(domain.ECodeInvalid, "L'action de support %d n'existe pas.", c.ID)
	} else if err == nil {
		err = row.Check(c)
	}
	return domainToApplication(err)
}

// CheckPayments tells a workflow, for each payment signal of a batch,
// whether a watcher recorded that payment as the signal claims, with the
// payment request it names: only money a watcher recorded is counted.
func (a *Activities) CheckPayments(ctx context.Context, claims []domain.PaymentClaim) ([]domain.PaymentCheck, error) {
	out, err := a.Store.CheckPayments(ctx, claims)
	return out, domainToApplication(err)
}

// PaymentRequest reads one payment request, for a workflow checking that a
// payment signal names one of its own (domain not_found when absent).
func (a *Activities) PaymentRequest(ctx context.Context, id string) (domain.Intent, error) {
	it, err := a.Store.Intent(ctx, id)
	return it, domainToApplication(err)
}

// PayOrderFromBalance debits the balance and settles the order atomically.
func (a *Activities) PayOrderFromBalance(ctx context.Context, in PayFromBalanceInput) error {
	taken := false
	if a.Capacity != nil {
		var err error
		if taken, err = a.Capacity.HoldCapacity(ctx, in.OrderRef, a.now().Add(capacityHoldFirst)); err != nil {
			return domainToApplication(err)
		}
	}
	err := a.Store.PayOrderFromBalance(ctx, in)
	a.releaseRefusedHold(ctx, in.OrderRef, taken, err)
	return domainToApplication(err)
}

// releaseRefusedHold gives back a hold this activity took when its payment
// was refused (a domain error: nothing was written), so the capacity is not
// kept from others for a payment that will not come.
func (a *Activities) releaseRefusedHold(ctx context.Context, orderRef string, taken bool, err error) {
	if !taken || !refused(err) {
		return
	}
	if rerr := a.Capacity.ReleaseHold(ctx, orderRef); rerr != nil {
		// The hold lapses at its deadline anyway.
		a.logger().Warn("release hold after a refused payment", "order", orderRef, "err", rerr)
	}
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// refused says err is a domain refusal, as domainToApplication judges it.
func refused(err error) bool {
	var de *domain.Error
	return errors.As(err, &de) && de.Code != domain.ECodeUnavailable && de.Code != domain.ECodeInternal
}

// CreditTopUp credits a confirmed top-up, once.
func (a *Activities) CreditTopUp(ctx context.Context, in CreditTopUpInput) error {
	return domainToApplication(a.Store.CreditTopUp(ctx, in))
}

// RefundToBalance credits a refund, once per support action.
func (a *Activities) RefundToBalance(ctx context.Context, in RefundInput) error {
	return domainToApplication(a.Store.RefundToBalance(ctx, in))
}

// ReserveCapacity reserves GPUs for the order.
func (a *Activities) ReserveCapacity(ctx context.Context, in ReserveInput) error {
	defer heartbeating(ctx)()
	return domainToApplication(a.Provisioner.Reserve(ctx, in))
}

// PreparePreset lays out the preparation preset.
func (a *Activities) PreparePreset(ctx context.Context, in PrepareInput) error {
	defer heartbeating(ctx)()
	return domainToApplication(a.Provisioner.Prepare(ctx, in))
}

// VerifyMachine reads what the machine really has.
func (a *Activities) VerifyMachine(ctx context.Context, in VerifyInput) (Verification, error) {
	defer heartbeating(ctx)()
	v, err := a.Provisioner.Verify(ctx, in)
	return v, domainToApplication(err)
}

// CreateAccess creates the customer's credentials.
func (a *Activities) CreateAccess(ctx context.Context, in CreateAccessInput) (AccessSummary, error) {
	defer heartbeating(ctx)()
	s, err := a.Provisioner.CreateAccess(ctx, in)
	return s, domainToApplication(err)
}

// RevokeAccess closes the customer's access.
func (a *Activities) RevokeAccess(ctx context.Context, orderRef string) error {
	defer heartbeating(ctx)()
	return a.Provisioner.RevokeAccess(ctx, orderRef)
}

// ReleaseCapacity wipes and releases the machine.
func (a *Activities) ReleaseCapacity(ctx context.Context, orderRef string) error {
	defer heartbeating(ctx)()
	return a.Provisioner.Release(ctx, orderRef)
}

// CreatePaymentIntent creates a payment request; refusals (method not
// offered, no fresh rate, a request still valid) come back as non-retryable
// errors carrying their code and French message.
func (a *Activities) CreatePaymentIntent(ctx context.Context, in CreateIntentInput) (domain.Intent, error) {
	if a.Payments == nil {
		return domain.Intent{}, temporal.NewNonRetryableApplicationError(
			"Le paiement en crypto n'est pas configuré sur ce serveur.", domain.ECodeMethodUnavailable, nil)
	}
	order := in.TargetKind == "order" && a.Capacity != nil
	taken := false
	if order {
		// A short hold, when the rules allow one: a request costs nothing
		// until it is paid. A payment seen extends it to the request's
		// deadline (the chain watcher, postgres.ExtendHeldForPayment).
		// Without a hold the request is made all the same: the machine
		// goes to the first payment.
		d, err := a.Capacity.HoldForRequest(ctx, in.TargetRef, a.now().Add(a.holdFirst()))
		if err != nil {
			return domain.Intent{}, domainToApplication(err)
		}
		taken = d.Taken
		if !d.Held {
			a.logger().Info("payment request without a hold", "order", in.TargetRef, "why", d.Reason)
		}
	}
	it, err := a.Payments.CreateIntent(ctx, in)
	if order {
		a.releaseRefusedHold(ctx, in.TargetRef, taken, err)
	}
	return it, domainToApplication(err)
}

// beatEvery is how often a machine step heartbeats: half its heartbeat
// timeout, so that a beat delayed by a busy machine still arrives in time
// (the SDK spaces the later ones by 80 % of the timeout anyway), and a
// step that ends sooner sends none. Every beat is one more write of the
// workflow on the Temporal server, for every order a busy block pays
// (BENCHMARKS.md); before, the first came after 2 s.
func beatEvery(ctx context.Context) time.Duration {
	if activity.IsActivity(ctx) {
		if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
			return hb / 2
		}
	}
	return 2 * time.Second
}

// heartbeating heartbeats in the background while a machine step runs, so a
// step whose worker died is retried after its heartbeat timeout (seconds)
// instead of its start-to-close timeout (minutes). Call the returned func
// when the step is done.
func heartbeating(ctx context.Context) func() { return beating(ctx, nil) }

// beating is heartbeating whose every beat carries details() when set (the
// server keeps the last one: what a retry resumes from).
func beating(ctx context.Context, details func() any) func() {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(beatEvery(ctx))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if details == nil {
					activity.RecordHeartbeat(ctx)
				} else {
					activity.RecordHeartbeat(ctx, details())
				}
			}
		}
	}()
	return func() { close(done) }
}

// RecordOrderEvents applies transitions of one order in order: one call for
// events the workflow writes together. When none of them moves money they
// go in one transaction (the "paid" event and the first provisioning
// step's start, for every order a block pays); otherwise each goes in its
// own, so that a refused one leaves those before it written.
func (a *Activities) RecordOrderEvents(ctx context.Context, evs []OrderEvent) error {
	if !slices.ContainsFunc(evs, OrderEvent.MovesMoney) {
		return domainToApplication(a.Store.RecordOrderEventsTogether(ctx, evs...))
	}
	for _, ev := range evs {
		if err := a.RecordOrderEvent(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// RecordTopUpEvents applies transitions of one top-up in order (see
// RecordOrderEvents).
func (a *Activities) RecordTopUpEvents(ctx context.Context, evs []TopUpEvent) error {
	for _, ev := range evs {
		if err := a.RecordTopUpEvent(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}
