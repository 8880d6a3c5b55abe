package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/kernodeck/kernodeck/domain"
)

const orderColumnList = `ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus, duration_days,
	preset, lot_cents, total_cents, status, payment_method, paid_cents, refunded_cents, unbacked_cents, shortfall_cents, paid_at,
	period_start, period_end, ended_at, ssh_public_key, workflow_id, workflow_started_at, created_at, updated_at,
	(SELECT COALESCE(SUM(x.amount_cents - x.counted_cents - x.refunded_cents - x.voided_cents), 0) FROM payment_exceptions x
		WHERE x.target_ref = orders.ref AND x.reason = 'late') AS late_cents,
	(SELECT CASE m.vendor WHEN 'amd' THEN 'rocm' ELSE 'cuda' END FROM gpu_models m WHERE m.model = orders.gpu_model) AS compute_stack,
	(SELECT m.display_name FROM gpu_models m WHERE m.model = orders.gpu_model) AS gpu_model_name,
	CASE WHEN orders.status = 'waiting_for_machine'
		THEN kd_waiting_ahead(orders.gpu_model, orders.total_gpus, orders.ref) + 1 ELSE 0 END AS line_position`

// unstartedLimit bounds one reconciler pass.
const unstartedLimit = 500

// refAttempts is how many fresh references an insert tries before giving up
// (a collision among 2^50 references is already unlikely).
const refAttempts = 3

// createOrderSQL inserts an order ($1 reference ... $13 SSH key), its
// "created" timeline event ($14 message, $15 data) and its mail ($16
// template, $17 data, whose "At" becomes the order's creation time) in one
// statement: one round trip, atomic like a transaction.
const createOrderSQL = `
	WITH o AS (
		INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
			duration_days, preset, lot_cents, total_cents, status, workflow_id, ssh_public_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULLIF($13, ''))
		RETURNING ` + orderColumnList + `
	), e AS (
		INSERT INTO timeline_events (ref, idem_key, kind, message, data)
		SELECT o.ref, '` + domain.KeyCreated + `', '` + domain.EventCreated + `', $14, $15 FROM o
	), m AS (
		INSERT INTO mail_outbox (outbox_key, account_id, template, ref, data)
		SELECT 'mail:' || o.ref || ':created', o.account_id, $16, o.ref, jsonb_set($17::jsonb, '{At}', to_jsonb(o.created_at))
		FROM o JOIN accounts a ON a.id = o.account_id AND a.email_verified_at IS NOT NULL -- see queueMail
		ON CONFLICT (outbox_key) DO NOTHING
	)
	SELECT * FROM o`

// CreateOrder inserts an order for a priced configuration, awaiting payment,
// with its "created" timeline event and mail, atomically. The reference is
// new and the workflow ID derived from it.
func (db *DB) CreateOrder(ctx context.Context, accountID int64, q domain.Quote) (domain.Order, error) {
	return db.createOrder(ctx, accountID, q, nil)
}

// createOrder is CreateOrder; check, if set, runs first in the order's
// transaction and may refuse it (a quota).
func (db *DB) createOrder(ctx context.Context, accountID int64, q domain.Quote, check func(*sqlx.Tx) error) (domain.Order, error) {
	data, err := json.Marshal(map[string]any{
		"gpu_model": q.Model, "lots": q.Lots, "total_gpus": q.TotalGPUs,
		"duration_days": q.DurationDays, "preset": q.Preset, "total_cents": q.TotalCents,
	})
	if err != nil {
		return domain.Order{}, fmt.Errorf("create order: %w", err)
	}
	msg := fmt.Sprintf("Commande enregistrée : %s, %d GPU, %s, total %s USD. En attente du règlement.",
		domain.Plural(q.Lots, "lot", "lots"), q.TotalGPUs, domain.Plural(q.DurationDays, "jour", "jours"), domain.FormatUSD(q.TotalCents))
	row := orderMailRow{AccountID: accountID, GPUModel: q.Model, Lots: q.Lots, TotalGPUs: q.TotalGPUs,
		DurationDays: q.DurationDays, TotalCents: q.TotalCents}
	mail, err := json.Marshal(row.data(domain.EventCreated, msg, nil, time.Time{}))
	if err != nil {
		return domain.Order{}, fmt.Errorf("create order: %w", err)
	}
	for attempt := 1; ; attempt++ {
		ref := domain.NewRef(domain.OrderRefPrefix)
		var o domain.Order
		args := []any{ref, accountID, q.Model, q.Lots, q.GPUsPerLot, q.TotalGPUs, q.DurationDays,
			q.Preset, q.LotCents, q.TotalCents, domain.StatusAwaitingPayment,
			domain.RentalWorkflowID(ref), q.SSHPublicKey, msg, string(data), MailTemplates[domain.EventCreated], string(mail)}
		if check == nil {
			err = db.getPrepared(ctx, &o, createOrderSQL, args...)
		} else {
			err = db.inTx(ctx, func(tx *sqlx.Tx) error {
				if err := check(tx); err != nil {
					return err
				}
				return tx.GetContext(ctx, &o, createOrderSQL, args...)
			})
		}
		if isUniqueViolation(err) && attempt < refAttempts {
			continue
		}
		if isUnverifiedOrderLimit(err) {
			return domain.Order{}, errUnverifiedOrder
		}
		if err != nil {
			return domain.Order{}, fmt.Errorf("create order: %w", err)
		}
		return o, nil
	}
}

func insertCreatedEvent(ctx context.Context, tx *sqlx.Tx, ref, message string, data []byte) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO timeline_events (ref, idem_key, kind, message, data)
		VALUES ($1, $2, $3, $4, $5)`, ref, domain.KeyCreated, domain.EventCreated, message, nullJSON(data))
	if err != nil {
		return fmt.Errorf("created event: %w", err)
	}
	return nil
}

// ListOrders returns an account's orders, newest first.
func (db *DB) ListOrders(ctx context.Context, accountID int64) ([]domain.Order, error) {
	orders := []domain.Order{}
	if err := db.SelectContext(ctx, &orders, `SELECT `+orderColumnList+` FROM orders
		WHERE account_id = $1 ORDER BY created_at DESC, ref`, accountID); err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return orders, nil
}

// GetOrder returns an order by reference, or ErrNotFound.
func (db *DB) GetOrder(ctx context.Context, ref string) (domain.Order, error) {
	var o domain.Order
	if err := db.GetContext(ctx, &o, `SELECT `+orderColumnList+` FROM orders WHERE ref = $1`, ref); err != nil {
		return domain.Order{}, fmt.Errorf("order %s: %w", ref, notFound(err))
	}
	return o, nil
}

// OrderForAccount returns the order if accountID owns it; ErrNotFound
// otherwise, so another customer's reference looks like an absent one.
func (db *DB) OrderForAccount(ctx context.Context, ref string, accountID int64) (domain.Order, error) {
	var o domain.Order
	if err := db.GetContext(ctx, &o, `SELECT `+orderColumnList+` FROM orders
		WHERE ref = $1 AND account_id = $2`, ref, accountID); err != nil {
		return domain.Order{}, fmt.Errorf("order %s: %w", ref, notFound(err))
	}
	return o, nil
}

// MarkOrderWorkflowStarted records that the order's workflow was started.
// The first time is kept.
func (db *DB) MarkOrderWorkflowStarted(ctx context.Context, ref string) error {
	return db.markStarted(ctx, "orders", "order", ref)
}

// markStarted records the first start of the workflow of ref (a row of
// table) in one prepared statement that does not wait for its commit to
// reach the disk (synchronous_commit off for its own transaction): the mark
// only spares the reconciler a start, so losing it in a database crash
// costs one idempotent start again, where waiting costs every creation a
// WAL flush.
func (db *DB) markStarted(ctx context.Context, table, what, ref string) error {
	st, err := db.prepared(ctx, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		UPDATE `+table+` SET workflow_started_at = COALESCE(workflow_started_at, now()) FROM async WHERE ref = $1`)
	if err != nil {
		return fmt.Errorf("mark %s %s started: %w", what, ref, err)
	}
	res, err := st.ExecContext(ctx, ref)
	if err != nil {
		return fmt.Errorf("mark %s %s started: %w", what, ref, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("mark %s %s started: %w", what, ref, domainNotFound)
	}
	return nil
}

// UnstartedOrders returns orders created more than olderThan ago whose
// workflow was never marked started, oldest first (at most 500 per call),
// for the reconciler.
func (db *DB) UnstartedOrders(ctx context.Context, olderThan time.Duration) ([]domain.Order, error) {
	orders := []domain.Order{}
	if err := db.SelectContext(ctx, &orders, `SELECT `+orderColumnList+` FROM orders
		WHERE workflow_started_at IS NULL AND created_at < now() - make_interval(secs => $1)
		ORDER BY created_at LIMIT $2`, olderThan.Seconds(), unstartedLimit); err != nil {
		return nil, fmt.Errorf("unstarted orders: %w", err)
	}
	return orders, nil
}

type timelineReadRow struct {
	ID      int64     `db:"id"`
	Ref     string    `db:"ref"`
	Kind    string    `db:"kind"`
	Message string    `db:"message"`
	Data    []byte    `db:"data"`
	At      time.Time `db:"at"`
}

// Timeline returns the timeline events of an order or top-up with an ID
// greater than afterID (0 for all), in order.
func (db *DB) Timeline(ctx context.Context, ref string, afterID int64) ([]domain.TimelineEvent, error) {
	var rows []timelineReadRow
	if err := db.SelectContext(ctx, &rows, `SELECT id, ref, kind, message, data, at
		FROM timeline_events WHERE ref = $1 AND id > $2 ORDER BY id`, ref, afterID); err != nil {
		return nil, fmt.Errorf("timeline %s: %w", ref, err)
	}
	events := make([]domain.TimelineEvent, len(rows))
	for i, r := range rows {
		events[i] = domain.TimelineEvent{ID: r.ID, Ref: r.Ref, Kind: r.Kind, Message: r.Message, At: r.At}
		if len(r.Data) > 0 {
			events[i].Data = json.RawMessage(r.Data)
		}
	}
	return events, nil
}

// accessColumns are the access columns safe to read anywhere: the sealed
// secrets (private key, Jupyter token) are read only by Store.OwnerOrder.
const accessColumns = `host, port, username, COALESCE(password, '') AS password, private_key_shown_at,
	key_fingerprint, jupyter_url, gpu_model_seen, gpu_count_seen, driver_version, cuda_version, notes,
	created_at, revoked_at`

// TimelineChannel is the PostgreSQL NOTIFY channel a trigger signals with the
// reference of every new timeline event.
const TimelineChannel = "timeline"

// TimelineListener follows the 'timeline' notifications on one connection
// and wakes the subscribers of the notified reference. One per API process;
// subscribers must still poll now and then, since a notification can be
// lost while the connection is re-established (they are all woken then).
type TimelineListener struct {
	url    string
	logger *slog.Logger
	// views and sessions are the DB's caches, which this listener keeps
	// true (the order_view and session_view notifications), and caches
	// both, which it keeps alive (its pings).
	views    *orderViews
	sessions *sessionCache
	caches   listened

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	// listening is closed once Run listens.
	listening chan struct{}
}

// NewTimelineListener returns a listener on db's server. Call Run.
func (db *DB) NewTimelineListener(logger *slog.Logger) *TimelineListener {
	if logger == nil {
		logger = slog.Default()
	}
	return &TimelineListener{url: db.URL, logger: logger, views: &db.views, sessions: &db.sessions, caches: db.listened(),
		subs: map[string]map[chan struct{}]struct{}{}, listening: make(chan struct{})}
}

// Run listens until ctx ends. It returns an error only when the channel
// cannot be listened to at all.
func (t *TimelineListener) Run(ctx context.Context) error {
	l := pq.NewListener(t.url, time.Second, 30*time.Second, func(ev pq.ListenerEventType, err error) {
		if ev == pq.ListenerEventDisconnected || ev == pq.ListenerEventConnectionAttemptFailed {
			t.caches.dead()
		}
		if err != nil {
			t.logger.Warn("timeline listener", "event", ev, "err", err)
		}
	})
	defer func() { _ = l.Close() }()
	defer t.caches.dead()
	for _, ch := range []string{TimelineChannel, OrderViewChannel, SessionChannel} {
		if err := l.Listen(ch); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	// What was read before this listener listened may miss a change.
	t.caches.empty()
	t.caches.alive(time.Now())
	close(t.listening)
	// Pings keep the cached views in use (viewAliveFor): one at a time, a
	// hung one lets them lapse.
	ping := time.NewTicker(viewAliveFor / 3)
	defer ping.Stop()
	var pinging atomic.Bool
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-l.Notify:
			if n == nil { // reconnected: notifications may have been lost
				t.caches.empty()
				t.wakeAll()
				continue
			}
			if n.Channel == SessionChannel {
				t.sessions.invalidate(n.Extra)
				continue
			}
			// Every other notification names a changed order: its cached
			// view goes before anyone is woken to read it again.
			invalidateView(t.views, n.Extra)
			if n.Channel == TimelineChannel {
				t.wake(n.Extra)
			}
		case <-ping.C:
			if pinging.CompareAndSwap(false, true) {
				go func() {
					defer pinging.Store(false)
					sent := time.Now()
					if l.Ping() == nil {
						t.caches.alive(sent)
					}
				}()
			}
		}
	}
}

// Listening is closed once Run listens: no notification is missed after.
func (t *TimelineListener) Listening() <-chan struct{} { return t.listening }

// AnyRef subscribes to the notifications of every reference (the support
// console's queue).
const AnyRef = ""

// Subscribe returns a channel that receives (coalesced) wake-ups when a
// timeline event is added for ref (any reference: AnyRef), and a function
// to unsubscribe.
func (t *TimelineListener) Subscribe(ref string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	if t.subs[ref] == nil {
		t.subs[ref] = map[chan struct{}]struct{}{}
	}
	t.subs[ref][ch] = struct{}{}
	t.mu.Unlock()
	return ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.subs[ref], ch)
		if len(t.subs[ref]) == 0 {
			delete(t.subs, ref)
		}
	}
}

func (t *TimelineListener) wake(ref string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.subs[ref] {
		wakeChan(ch)
	}
	if ref != AnyRef {
		for ch := range t.subs[AnyRef] {
			wakeChan(ch)
		}
	}
}

func (t *TimelineListener) wakeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, set := range t.subs {
		for ch := range set {
			wakeChan(ch)
		}
	}
}

func wakeChan(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
