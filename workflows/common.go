package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
)

// Typed search attribute keys (see the SearchAttr* names in contract.go).
var (
	saKeyRef      = temporal.NewSearchAttributeKeyKeyword(SearchAttrRef)
	saKeyCustomer = temporal.NewSearchAttributeKeyKeyword(SearchAttrCustomer)
	saKeyStatus   = temporal.NewSearchAttributeKeyKeyword(SearchAttrStatus)
	saKeyGPU      = temporal.NewSearchAttributeKeyKeyword(SearchAttrGPU)
	saKeyAsset    = temporal.NewSearchAttributeKeyKeyword(SearchAttrAsset)
	saKeyNetwork  = temporal.NewSearchAttributeKeyKeyword(SearchAttrNetwork)
	saKeyKind     = temporal.NewSearchAttributeKeyKeyword(SearchAttrKind)
)

// Payment methods stored on a settled order.
const (
	methodCrypto  = "crypto"
	methodBalance = "balance"
	methodSupport = "support"
)

// frDateLayout renders dates in customer messages; always applied to UTC
// times so the text is the same on every replay and every worker.
const frDateLayout = "02/01/2006 à 15:04 UTC"

func frDate(t time.Time) string { return t.UTC().Format(frDateLayout) }

func usd(cents int64) string { return domain.FormatUSD(cents) + " USD" }

// timelineCtx is for timeline and ledger writes: the database is the system of
// record, so these retry until they succeed (only a domain refusal, which is
// non-retryable, comes back). One write takes milliseconds: 10 s bounds how
// long a write lost with its worker waits before it is retried.
func timelineCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         timelineRetry(),
	})
}

// timelineRetry retries a timeline write without limit.
func timelineRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    0, // unlimited
	}
}

// machineCtx is for machine driver calls. attempts 0 means unlimited: teardown
// must eventually revoke and release, whereas provisioning gives up after a few
// attempts and hands over to support. A step may take minutes (SSH, preset
// setup) but heartbeats every few seconds (activities.heartbeating): a step
// lost with its worker is retried after HeartbeatTimeout, not StartToClose.
func machineCtx(ctx workflow.Context, attempts int32) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    MachineHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    5 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Minute,
			MaximumAttempts:    attempts,
		},
	})
}

// MachineHeartbeatTimeout is how long a machine step may go without a
// heartbeat before Temporal retries it on another worker.
const MachineHeartbeatTimeout = 10 * time.Second

// reject builds an update refusal: a French message under a domain error code,
// which the API maps back to a *domain.Error.
func reject(code, message string) error {
	return temporal.NewApplicationError(message, code)
}

// errUnavailable is returned by an update handler whose timeline write could
// not complete (the workflow is being cancelled).
func errUnavailable() error {
	return reject(domain.ECodeUnavailable, "Le service est momentanément indisponible. Réessayez plus tard.")
}

// refusal turns a domain validation error into an update refusal (same code
// and message as the API gives for the same input); nil stays nil.
func refusal(err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		return reject(de.Code, de.Message)
	}
	return err
}

// asRefusal turns an activity failure into an update refusal keeping the
// domain code and French message the activity carried.
func asRefusal(err error, fallback string) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() != "" {
		msg := ae.Message()
		if msg == "" {
			msg = fallback
		}
		return reject(ae.Type(), msg)
	}
	return reject(domain.ECodeUnavailable, fallback)
}

// failureMessage extracts the useful part of an activity error (the
// ActivityError wrapper only adds scheduling details).
func failureMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) {
		if cause := errors.Unwrap(act); cause != nil {
			return cause.Error()
		}
	}
	return err.Error()
}

// paymentData is the timeline data of an on-chain payment.
func paymentData(p PaymentEvent) map[string]any {
	return map[string]any{
		"key":          p.Key(),
		"network":      p.Network,
		"asset":        p.Asset,
		"txid":         p.TxID,
		"index":        p.Index,
		"amount_base":  p.AmountBase,
		"amount_cents": p.AmountCents,
		"intent_id":    p.IntentID,
		"late":         p.Late,
	}
}

// supportData is the timeline data of a support action: who and why.
func supportData(action string, actionID int64, agent, reason string) map[string]any {
	return map[string]any{"action": action, "action_id": actionID, "agent": agent, "reason": reason}
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

func ptrTo[T any](v T) *T { return &v }

// countedPayment is a received payment counted toward an order or a
// top-up: if the target then expires, its amount goes back to support's
// queue (partial), less what was refunded.
type countedPayment struct {
	P     PaymentEvent
	Cents int64
	// QKey is the payment's key in support's queue (see paymentLedger.qkey);
	// empty: P.Key().
	QKey string `json:",omitempty"`
}

// addCounted adds c to list, merged into the entry of the same payment
// generation if there is one (a payment mined again partly backing earlier
// refunds, partly counted anew): one entry, one queued row per generation.
func addCounted(list []countedPayment, c countedPayment) []countedPayment {
	for i := range list {
		if list[i].qkey() == c.qkey() {
			list[i].P.AmountCents += c.P.AmountCents
			list[i].Cents += c.Cents
			return list
		}
	}
	return append(list, c)
}

// appendOnce appends s to list unless it is there.
func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func (c countedPayment) qkey() string {
	if c.QKey != "" {
		return c.QKey
	}
	return c.P.Key()
}

// partialExceptions queues the counted payments of a target that expired,
// less refunded (taken from the oldest first).
func partialExceptions(counted []countedPayment, refunded int64) []domain.NewException {
	var out []domain.NewException
	for _, c := range counted {
		cents := c.Cents
		take := min(cents, refunded)
		cents, refunded = cents-take, refunded-take
		if cents > 0 {
			out = append(out, newException(domain.ExceptionPartial, c.qkey(), c.P, cents))
		}
	}
	return out
}

// newException is a received amount (all or part of p) put in support's
// queue under key (p.Key(), or its generation after a reversal).
func newException(reason, key string, p PaymentEvent, cents int64) domain.NewException {
	return domain.NewException{Reason: reason, PaymentKey: key, Network: p.Network, TxID: p.TxID,
		Asset: p.Asset, AmountBase: p.AmountBase, AmountCents: cents}
}

// loadException reads a queued amount named by an attribution and checks it
// belongs to ref.
func loadException(ctx workflow.Context, id int64, ref string) (domain.Exception, error) {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var e domain.Exception
	if err := workflow.ExecuteActivity(actx, a.LoadException, id).Get(ctx, &e); err != nil {
		return e, asRefusal(err, "Le montant en attente n'a pas pu être lu. Réessayez plus tard.")
	}
	if e.TargetRef != ref {
		return e, reject(domain.ECodeNotFound, "Ce montant en attente ne concerne pas ce dossier.")
	}
	return e, nil
}

// countException loads the queued amount an attribution names (it must
// belong to ref) and returns the payment it counts: the attribution's
// amount, or all that remains up to due, never more than remains. The use
// goes on the attribution's event, and data says what was counted. From
// vRefundShortfall the counted payment is keyed by the queued row's payment
// key, so the payment's reversal finds and uncounts it.
func countException(ctx workflow.Context, v workflow.Version, at Attribution, ref string, due int64, data map[string]any) (countedPayment, *domain.ExceptionUse, error) {
	e, err := loadException(ctx, at.ExceptionID, ref)
	if err != nil {
		return countedPayment{}, nil, err
	}
	amount := at.AmountCents
	if amount == 0 {
		amount = min(due, e.RemainingCents())
	}
	if amount <= 0 || amount > e.RemainingCents() {
		return countedPayment{}, nil, reject(domain.ECodeConflict, fmt.Sprintf("Ce montant en attente n'a plus que %s à régler.", usd(e.RemainingCents())))
	}
	data["amount_cents"], data["exception_id"], data["payment_key"] = amount, e.ID, e.PaymentKey
	c := countedPayment{P: PaymentEvent{Network: e.Network, TxID: e.TxID, Asset: e.Asset, AmountBase: e.AmountBase, AmountCents: amount},
		Cents: amount}
	if v >= vRefundShortfall {
		c.QKey = e.PaymentKey
	}
	return c, &domain.ExceptionUse{ExceptionID: e.ID, Cents: amount}, nil
}

// paymentLedger tracks the on-chain payments of one order or top-up by key:
// a payment is counted once however often a watcher re-sends it.
type paymentLedger struct {
	Counted map[string]bool // confirmed (counted, late or extra) or attributed
	Pending map[string]bool // seen, neither confirmed nor reverted yet
	SeenN   map[string]int  // times seen, so a payment re-seen after a reorg gets a new event key
	RevertN map[string]int
	// Gen counts a payment's reversals after confirmation: its next
	// confirmation is a new generation, with keys of its own (qkey).
	Gen map[string]int
	// Dust is the latest dust summary version applied per payment request.
	Dust map[string]int64
	// Ver is the newest state version applied per payment (vStateOrder).
	Ver map[string]int64 `json:",omitempty"`
	// Requests are the workflow's own payment requests known so far
	// (addressedChecks): a payment signal must name one of them with its
	// address, asset and network.
	Requests map[string]PaymentRequestRef `json:",omitempty"`
}

// PaymentRequestRef is what a payment signal must repeat of the payment
// request it names.
type PaymentRequestRef struct {
	Address, Asset, Network string
}

// addRequest records a payment request the workflow made.
func (l *paymentLedger) addRequest(it domain.Intent) {
	if l.Requests == nil {
		l.Requests = map[string]PaymentRequestRef{} // a ledger carried from before the field
	}
	l.Requests[it.ID] = PaymentRequestRef{Address: it.Address, Asset: it.Asset, Network: it.Network}
}

// ownRequest reports whether intentID is one of the workflow's payment
// requests (targetKind, ref) with that address, asset and network. A
// request the workflow did not make in this run's memory (made before
// vAddressed, or in a run whose ledger predates the field) is read from
// PostgreSQL once, in a local activity, and kept if it is ours.
func (l *paymentLedger) ownRequest(ctx workflow.Context, targetKind, ref, intentID, address, asset, network string) bool {
	got := PaymentRequestRef{Address: address, Asset: asset, Network: network}
	if want, ok := l.Requests[intentID]; ok {
		return want == got
	}
	if intentID == "" {
		return false
	}
	var a *activities.Activities
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: localRetryWindow,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            timelineRetry(),
	})
	var it domain.Intent
	if err := workflow.ExecuteLocalActivity(lctx, a.PaymentRequest, intentID).Get(ctx, &it); err != nil {
		return false // not found: not ours
	}
	if it.TargetKind != targetKind || it.TargetRef != ref {
		return false
	}
	if l.Requests == nil {
		l.Requests = map[string]PaymentRequestRef{}
	}
	l.addRequest(it)
	return l.Requests[intentID] == got
}

func newPaymentLedger() *paymentLedger {
	return &paymentLedger{
		Counted:  map[string]bool{},
		Pending:  map[string]bool{},
		SeenN:    map[string]int{},
		RevertN:  map[string]int{},
		Gen:      map[string]int{},
		Dust:     map[string]int64{},
		Ver:      map[string]int64{},
		Requests: map[string]PaymentRequestRef{},
	}
}

// stale reports whether p is older than a state of its payment already
// applied (vStateOrder); otherwise p's version becomes the newest. A
// signal without a version (an older watcher) is never stale.
func (l *paymentLedger) stale(p PaymentEvent) bool {
	if p.StateVersion == 0 {
		return false
	}
	if l.Ver == nil {
		l.Ver = map[string]int64{} // a ledger carried from a run before the field
	}
	key := p.Key()
	if p.StateVersion <= l.Ver[key] {
		return true
	}
	l.Ver[key] = p.StateVersion
	return false
}

// qkey is the key of a payment's current generation in events and in
// support's queue: the payment key itself, then "key~n" after its n-th
// reversal after confirmation, so a payment mined again is counted (or
// queued) again once, beside what its reversal voided.
func (l *paymentLedger) qkey(key string) string { return genKey(key, l.Gen[key]) }

func genKey(key string, gen int) string {
	if gen == 0 {
		return key
	}
	return fmt.Sprintf("%s~%d", key, gen)
}

// dustFresh reports whether s is newer than the summary applied for its
// request, and marks it applied.
func (l *paymentLedger) dustFresh(s DustSummary) bool {
	if s.Version <= l.Dust[s.IntentID] {
		return false
	}
	l.Dust[s.IntentID] = s.Version
	return true
}

// seen marks key pending; ok is false if the payment is already known.
func (l *paymentLedger) seen(key string, late bool) (eventKey string, ok bool) {
	if l.Counted[key] || l.Pending[key] {
		return "", false
	}
	if !late {
		// A late payment never holds the order open: it goes to support.
		l.Pending[key] = true
	}
	l.SeenN[key]++
	return domain.KeySeen(key, l.SeenN[key]), true
}

// reverted drops a pending payment; ok is false if key was not pending.
func (l *paymentLedger) reverted(key string) (eventKey string, ok bool) {
	if !l.Pending[key] {
		return "", false
	}
	delete(l.Pending, key)
	l.RevertN[key]++
	return domain.KeyReverted(key, l.RevertN[key]), true
}

// confirm counts key; ok is false if it was already counted.
func (l *paymentLedger) confirm(key string) (ok bool) {
	if l.Counted[key] {
		return false
	}
	l.Counted[key] = true
	delete(l.Pending, key)
	return true
}

// ordered puts p in its payment's order of generations (vReversalOrder).
// stale: p belongs to a generation already reverted, or is a reversal
// already applied; it changes nothing. A state from a later generation
// first applies the reversal the workflow has not handled yet (its signal
// waits later in the batch, or was never delivered): revert, the target's
// revertConfirmed, uncounts the payment if it is counted. The caller holds
// mu.
func (l *paymentLedger) ordered(ctx workflow.Context, v workflow.Version, p PaymentEvent,
	revert func(workflow.Context, PaymentEvent) error) (stale bool, err error) {
	// A reversal without its generation comes from a watcher older than
	// the field: applied as before (deploy chainwatch before the workers).
	if v < vReversalOrder || (p.AfterConfirmation && p.Reversals == 0) {
		return false, nil
	}
	key := p.Key()
	switch g := l.Gen[key]; {
	case p.Reversals < g, p.Reversals == g && p.AfterConfirmation:
		return true, nil
	case p.Reversals == g:
		return false, nil
	}
	if l.Counted[key] {
		rp := p
		rp.AfterConfirmation = true
		if err := revert(ctx, rp); err != nil {
			return false, err
		}
	}
	l.Gen[key] = p.Reversals
	return false, nil
}

// without returns list without s (order kept).
func without(list []string, s string) []string {
	out := list[:0:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// awaitOrTimeout waits for cond at most d. The timer lives in a child context
// cancelled on return, so a condition met early leaves no timer pending.
func awaitOrTimeout(ctx workflow.Context, d time.Duration, cond func() bool) (ok bool, err error) {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, d)
	if err := workflow.Await(ctx, func() bool { return cond() || timer.IsReady() }); err != nil {
		return false, err
	}
	return cond(), nil
}

// paymentTarget is what the payment signal loop drives: a rental or a top-up.
type paymentTarget interface {
	ledger() *paymentLedger
	// targetKind and ref name the order or top-up, as its payment
	// requests do ("order" or "topup").
	targetKind() string
	ref() string
	onSeen(ctx workflow.Context, p PaymentEvent) error
	onConfirmed(ctx workflow.Context, p PaymentEvent) error
	onReverted(ctx workflow.Context, p PaymentEvent) error
	onDust(ctx workflow.Context, s DustSummary) error
	// startBatch keeps the timeline writes of the handlers that follow for
	// flushBatch, which writes them in one local activity.
	startBatch()
	flushBatch(ctx workflow.Context) error
}

// maxPaymentBatch bounds the signals handled in one batch (and so the size
// of its one timeline write).
const maxPaymentBatch = 100

// listenPayments handles the chain watchers' signals for the workflow's
// life, under mu; busy counts the handlers running, so the workflow
// returns only after them. From vReorgDust on, the signals already
// received are handled together with one timeline write, whatever payers
// send (dust summaries included); before, one by one. Within a batch the
// signals are taken by kind (seen, confirmed, reverted, dust), as the
// selector does.
func listenPayments(ctx workflow.Context, v workflow.Version, mu workflow.Mutex, busy *int, t paymentTarget) {
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
			err = t.onSeen(ctx, sig.ev)
		case SignalPaymentConfirmed:
			err = t.onConfirmed(ctx, sig.ev)
		case SignalPaymentReverted:
			err = t.onReverted(ctx, sig.ev)
		case SignalPaymentDust:
			err = t.onDust(ctx, sig.dust)
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

// admitted reports whether a payment signal is addressed to this workflow
// and names one of its payment requests (addressedChecks); a refused one
// is logged and counted, and changes nothing.
func admitted(ctx workflow.Context, v workflow.Version, t paymentTarget, sig paymentSignal) bool {
	if !addressedChecks(ctx, v) {
		return true
	}
	target, intent, address, asset, network := sig.ev.Target, sig.ev.IntentID, sig.ev.Address, sig.ev.Asset, sig.ev.Network
	if sig.name == SignalPaymentDust {
		target, intent, address, asset, network = sig.dust.Target, sig.dust.IntentID, sig.dust.Address, sig.dust.Asset, sig.dust.Network
	}
	switch {
	case target != workflow.GetInfo(ctx).WorkflowExecution.ID:
		refused(ctx, "signal", sig.name, refusedAddress)
		return false
	case !t.ledger().ownRequest(ctx, t.targetKind(), t.ref(), intent, address, asset, network):
		refused(ctx, "signal", sig.name, refusedRequest)
		return false
	}
	return true
}

// changeAddressed extends vAddressed's checks to workflows started before
// it, from the first signal or support update they handle after the
// upgrade (one marker); their recorded histories replay as they ran.
const changeAddressed = "kernodeck-addressed"

// addressedChecks reports whether signals and support updates are checked
// against their address, payment request and support_actions row.
func addressedChecks(ctx workflow.Context, v workflow.Version) bool {
	return v >= vAddressed || workflow.GetVersion(ctx, changeAddressed, workflow.DefaultVersion, 1) == 1
}

// checkAction has a support update's support_actions row checked against
// what the update claims (addressedChecks), before the update changes
// anything; a mismatch is refused, logged and counted.
func checkAction(ctx workflow.Context, v workflow.Version, update string, c domain.SupportActionClaim) error {
	if !addressedChecks(ctx, v) {
		return nil
	}
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	err := workflow.ExecuteActivity(actx, a.CheckSupportAction, c).Get(ctx, nil)
	if err == nil {
		return nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == domain.ECodeInvalid {
		refused(ctx, "update", update, refusedAction)
	}
	return asRefusal(err, "L'action de support n'a pas pu être vérifiée. Réessayez plus tard.")
}

func wellFormed(sig paymentSignal) bool {
	if sig.name == SignalPaymentDust {
		return sig.dust.IntentID != "" && sig.dust.Network != ""
	}
	return sig.ev.Network != "" && sig.ev.TxID != ""
}

// upsertPaymentAttributes lets operators find the workflow by the asset and
// network of its payment.
func upsertPaymentAttributes(ctx workflow.Context, p PaymentEvent) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		saKeyAsset.ValueSet(p.Asset), saKeyNetwork.ValueSet(p.Network)); err != nil {
		workflow.GetLogger(ctx).Error("upsert payment search attributes", "error", err)
	}
}

// Versions of the workflows' commands. One change ID, read once when a
// workflow starts (historyVersion): every later branch reads the stored
// value, so a new behaviour costs one marker per workflow, not one per
// call site, and a workflow started before it keeps its old commands.
const (
	changeHistory = "kernodeck-history"
	// vLocalTimeline: timeline writes are local activities (one marker
	// event, no workflow task of their own), a step's "done" event goes
	// with the next event's write, and the payment's search attributes
	// ride on the status upsert.
	vLocalTimeline workflow.Version = 1
	// vReorgDust: a payment reverted after its confirmation is uncounted
	// (back to awaiting payment, or flagged for support), dust summaries
	// go to support's queue, and payment signals are handled in batches
	// (one timeline write per batch).
	vReorgDust workflow.Version = 2
	// vContinueAsNew: a rental or top-up whose history passes its bound
	// (or the server's suggestion) continues as new at its next waiting
	// point, carrying its whole state.
	vContinueAsNew workflow.Version = 3
	// vReversalOrder: a payment state is ordered by its generation
	// (PaymentEvent.Reversals) against the reversals already applied, so a
	// batch holding a reversal after confirmation and the same payment's
	// confirmation mined again counts it once, whichever is read first.
	vReversalOrder workflow.Version = 4
	// vRefundShortfall: order refunds paid out on a payment a reversal
	// removes are its shortfall, not owed again by the order (what is due
	// stays the total less what remains counted); the payment mined again
	// backs them first, the rest counting as any payment.
	vRefundShortfall workflow.Version = 5
	// vStateOrder: a payment state older than one already applied
	// (PaymentEvent.StateVersion) is ignored, so a batch read by kind
	// leaves each payment in its newest state (reverted then seen again,
	// seen in the mempool then replaced, reverted before a confirmation).
	vStateOrder workflow.Version = 6
	// vAddressed: a payment signal must be addressed to the workflow
	// (PaymentEvent.Target) and name one of its own payment requests with
	// that request's address, asset and network; support actions are
	// checked against their support_actions row before they change
	// anything.
	vAddressed  workflow.Version = 7
	vMaxHistory                  = vAddressed
)

// DefaultMaxHistory is the history length past which a rental or a
// top-up continues as new at its next waiting point.
const DefaultMaxHistory = 2000

// historyFull reports whether the run should continue as new.
func historyFull(ctx workflow.Context, v workflow.Version, max int) bool {
	if v < vContinueAsNew {
		return false
	}
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= max
}

// signalsPending reports whether a payment signal waits in its channel.
func signalsPending(ctx workflow.Context) bool {
	for _, name := range paymentSignalNames(true) {
		if workflow.GetSignalChannel(ctx, name).Len() > 0 {
			return true
		}
	}
	return false
}

// historyVersion is the workflow's command version, taken at its start.
func historyVersion(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeHistory, workflow.DefaultVersion, vMaxHistory)
}

// localTimelineCtx is timelineCtx for local activities: the same
// unlimited retries (a write lost with its worker is redone on replay).
func localTimelineCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: localRetryWindow,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            timelineRetry(),
	})
}

// localRetryWindow is how long a local activity's retries go on. Without
// it the SDK stops them at the attempt timeout (10 s): a write refused for
// longer (PostgreSQL away, a worker too busy) was lost, or failed its
// workflow, in a 5,000-order burst. Thirty days: as long as any rental.
const localRetryWindow = 30 * 24 * time.Hour

// execTimeline runs a timeline write (fn, one of the Record* activities)
// as a local activity from vLocalTimeline on, as an activity before.
func execTimeline(ctx workflow.Context, v workflow.Version, fn, arg any) error {
	if v >= vLocalTimeline {
		return workflow.ExecuteLocalActivity(localTimelineCtx(ctx), fn, arg).Get(ctx, nil)
	}
	return workflow.ExecuteActivity(timelineCtx(ctx), fn, arg).Get(ctx, nil)
}

// searchAttrs keeps the payment's asset and network for the workflow's
// next status upsert (vLocalTimeline: one upsert event instead of two, and
// none for a value already set); before, each is upserted at once.
type searchAttrs struct {
	V              workflow.Version
	Asset, Network string // as last upserted
	pending        []temporal.SearchAttributeUpdate
}

// notePayment records the asset and network of a payment or request.
func (s *searchAttrs) notePayment(ctx workflow.Context, p PaymentEvent) {
	if s.V < vLocalTimeline {
		upsertPaymentAttributes(ctx, p)
		return
	}
	if p.Asset == s.Asset && p.Network == s.Network {
		return
	}
	s.Asset, s.Network = p.Asset, p.Network
	s.pending = append(s.pending, saKeyAsset.ValueSet(p.Asset), saKeyNetwork.ValueSet(p.Network))
}

// setStatus upserts the status with what notePayment kept.
func (s *searchAttrs) setStatus(ctx workflow.Context, status string) {
	s.pending = append(s.pending, saKeyStatus.ValueSet(status))
	s.flush(ctx)
}

// flush upserts what notePayment kept, if anything.
func (s *searchAttrs) flush(ctx workflow.Context) {
	if len(s.pending) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, s.pending...); err != nil {
		workflow.GetLogger(ctx).Error("upsert search attributes", "error", err)
	}
	s.pending = nil
}

// qkeyIfGen keeps a counted payment's queue key only when it differs from
// the payment's own key (a later generation).
func qkeyIfGen(qkey string, p PaymentEvent) string {
	if qkey == p.Key() {
		return ""
	}
	return qkey
}
