package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// stmtCache holds the prepared statements of the hottest queries. A
// prepared statement runs in one round trip (Bind/Execute) where lib/pq
// sends an unprepared query with arguments in two (Parse/Describe, then
// Bind/Execute), and PostgreSQL reuses its plan.
type stmtCache struct {
	mu    sync.Mutex
	stmts map[string]*sqlx.Stmt
}

// prepared returns query prepared on the pool (database/sql prepares it
// again on each connection the first time it runs there).
func (db *DB) prepared(ctx context.Context, query string) (*sqlx.Stmt, error) {
	db.stmts.mu.Lock()
	defer db.stmts.mu.Unlock()
	if st, ok := db.stmts.stmts[query]; ok {
		return st, nil
	}
	st, err := db.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if db.stmts.stmts == nil {
		db.stmts.stmts = map[string]*sqlx.Stmt{}
	}
	db.stmts.stmts[query] = st
	return st, nil
}

// getPrepared is GetContext through the prepared statement of query.
func (db *DB) getPrepared(ctx context.Context, dest any, query string, args ...any) error {
	st, err := db.prepared(ctx, query)
	if err != nil {
		return err
	}
	return st.GetContext(ctx, dest, args...)
}

// timelineCache keeps, per order, the timeline last read with its size and
// newest event id. Timelines only grow (events are never changed or
// deleted, and ids are unique), so the same size and newest id mean the
// same events: the statement then sends no timeline and nothing is decoded
// again. An event committed late with a smaller id changes the size.
type timelineCache struct {
	mu sync.Mutex
	m  map[string]cachedTimeline
}

type cachedTimeline struct {
	n, maxID int64
	events   []domain.TimelineEvent // shared: never changed in place
}

// timelineCacheSize bounds the cache (about 5 kB per active order).
const timelineCacheSize = 20_000

// key is what the statement compares: (-1, -1) when nothing is cached.
func (c *timelineCache) key(ref string) (n, maxID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[ref]; ok {
		return t.n, t.maxID
	}
	return -1, -1
}

func (c *timelineCache) get(ref string, n, maxID int64) ([]domain.TimelineEvent, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[ref]
	if !ok || t.n != n || t.maxID != maxID {
		return nil, false
	}
	return t.events, true
}

func (c *timelineCache) put(ref string, t cachedTimeline) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedTimeline{}
	}
	if _, ok := c.m[ref]; !ok && len(c.m) >= timelineCacheSize {
		for k := range c.m { // full: one entry makes room
			delete(c.m, k)
			break
		}
	}
	c.m[ref] = t
}

// ownerOrderSelect reads the order selected by the condition on orders
// where with everything its owner sees, in one statement: the timeline
// (unless its size and newest event id are the cached ones, the last two
// parameters), the payment requests with their claims, the payments seen
// for them (not reverted) with their confirmations, the access row, and
// while the order is unpaid its live capacity hold.
// The parts come as JSON documents whose keys are the column names
// (orderRecordRow decodes them).
func ownerOrderSelect(where, cachedN, cachedMax string) string {
	return `
	SELECT o.*, tl.timeline_n, tl.timeline_max,
		CASE WHEN tl.timeline_n = ` + cachedN + ` AND tl.timeline_max = ` + cachedMax + ` THEN NULL
		ELSE COALESCE((SELECT json_agg(json_build_object('id', t.id, 'kind', t.kind, 'message', t.message,
				'data', t.data, 'at', t.at) ORDER BY t.id)
			FROM timeline_events t WHERE t.ref = o.ref), '[]') END AS timeline_json,
		COALESCE((SELECT json_agg(json_build_object('id', i.id, 'target_kind', i.target_kind, 'target_ref', i.target_ref,
				'account_id', i.account_id, 'asset', i.asset, 'network', i.network, 'decimals', i.decimals,
				'amount_base', i.amount_base::text, 'usd_cents', i.usd_cents, 'rate', i.rate::text,
				'rate_source', i.rate_source, 'rate_at', i.rate_at, 'address', i.address,
				'derivation_index', i.derivation_index, 'reference_key', i.reference_key,
				'token_contract', i.token_contract, 'payment_uri', i.payment_uri, 'deadline', i.deadline,
				'watch_until', i.watch_until, 'status', i.status, 'created_at', i.created_at,
				'claims', (SELECT json_agg(c.created_at ORDER BY c.id) FROM payment_claims c WHERE c.intent_id = i.id))
				ORDER BY i.seq DESC)
			FROM payment_intents i WHERE i.target_ref = o.ref), '[]') AS intents_json,
		COALESCE((SELECT json_agg(json_build_object('intent_id', p.intent_id, 'decimals', i.decimals, 'txid', p.txid,
				'asset', p.asset, 'amount_base', p.amount_base::text, 'amount_cents', p.amount_cents,
				'state', p.state, 'late', p.late, 'network', p.network, 'block_height', p.block_height,
				'tip', ` + tipOf("p.network") + `)
				ORDER BY p.seen_at, p.txid, p.output_index)
			FROM chain_payments p JOIN payment_intents i ON i.id = p.intent_id
			WHERE i.target_ref = o.ref AND p.state <> 'reverted'), '[]') AS payments_json,
		(SELECT json_build_object('host', a.host, 'port', a.port, 'username', a.username,
				'password', COALESCE(a.password, ''), 'private_key_shown_at', a.private_key_shown_at,
				'key_fingerprint', a.key_fingerprint, 'jupyter_url', a.jupyter_url,
				'gpu_model_seen', a.gpu_model_seen, 'gpu_count_seen', a.gpu_count_seen,
				'driver_version', a.driver_version, 'cuda_version', a.cuda_version, 'notes', a.notes,
				'created_at', a.created_at, 'revoked_at', a.revoked_at,
				'has_key', a.private_key IS NOT NULL, 'jupyter_token', a.jupyter_token, 'now', now())
			FROM order_access a WHERE a.order_ref = o.ref) AS access_json,
		CASE WHEN o.status IN ('awaiting_payment', 'payment_detected') THEN
			(SELECT json_build_object('held', true, 'until', l.held_until) FROM live_capacity_holds l WHERE l.order_ref = o.ref)
		END AS hold_json
	FROM (SELECT ` + orderColumnList + ` FROM orders WHERE ` + where + `) o
	CROSS JOIN LATERAL (SELECT count(*) AS timeline_n, COALESCE(max(t.id), 0) AS timeline_max
		FROM timeline_events t WHERE t.ref = o.ref) tl`
}

// ownerOrderSQL reads the order $1 of the account $2 (cached timeline: $3
// events, newest $4).
var ownerOrderSQL = ownerOrderSelect(`ref = $1 AND account_id = $2`, `$3`, `$4`)

// orderRecordRow is one row of ownerOrderSQL.
type orderRecordRow struct {
	domain.Order
	TimelineN   int64           `db:"timeline_n"`
	TimelineMax int64           `db:"timeline_max"`
	Timeline    []byte          `db:"timeline_json"` // NULL: the cached one
	Intents     json.RawMessage `db:"intents_json"`
	Payments    json.RawMessage `db:"payments_json"`
	Access      []byte          `db:"access_json"`
	Hold        []byte          `db:"hold_json"` // NULL: none held
}

type timelineJSON struct {
	ID      int64           `json:"id"`
	Kind    string          `json:"kind"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	At      time.Time       `json:"at"`
}

type intentJSON struct {
	ID              string        `json:"id"`
	TargetKind      string        `json:"target_kind"`
	TargetRef       string        `json:"target_ref"`
	AccountID       int64         `json:"account_id"`
	Asset           string        `json:"asset"`
	Network         string        `json:"network"`
	Decimals        int32         `json:"decimals"`
	AmountBase      domain.BigInt `json:"amount_base"`
	USDCents        int64         `json:"usd_cents"`
	Rate            string        `json:"rate"`
	RateSource      string        `json:"rate_source"`
	RateAt          time.Time     `json:"rate_at"`
	Address         string        `json:"address"`
	DerivationIndex *int64        `json:"derivation_index"`
	ReferenceKey    *string       `json:"reference_key"`
	TokenContract   *string       `json:"token_contract"`
	PaymentURI      string        `json:"payment_uri"`
	Deadline        time.Time     `json:"deadline"`
	WatchUntil      time.Time     `json:"watch_until"`
	Status          string        `json:"status"`
	CreatedAt       time.Time     `json:"created_at"`
	Claims          []time.Time   `json:"claims"`
}

type paymentJSON struct {
	IntentID    string        `json:"intent_id" db:"intent_id"`
	Decimals    int32         `json:"decimals" db:"decimals"`
	TxID        string        `json:"txid" db:"txid"`
	Asset       string        `json:"asset" db:"asset"`
	AmountBase  domain.BigInt `json:"amount_base" db:"amount_base"`
	AmountCents int64         `json:"amount_cents" db:"amount_cents"`
	State       string        `json:"state" db:"state"`
	Late        bool          `json:"late" db:"late"`
	Network     string        `json:"network" db:"network"`
	BlockHeight *int64        `json:"block_height" db:"block_height"`
	Tip         *int64        `json:"tip" db:"tip"` // the network's highest recorded block
}

// payments groups ps by payment request, their confirmations counted from
// tips (nil: each payment's own Tip).
func payments(ps []paymentJSON, tips map[string]*int64) map[string][]domain.IntentPayment {
	out := map[string][]domain.IntentPayment{}
	for _, p := range ps {
		tip := p.Tip
		if tips != nil {
			tip = tips[p.Network]
		}
		out[p.IntentID] = append(out[p.IntentID], domain.IntentPayment{TxID: p.TxID, Asset: p.Asset,
			AmountBase: p.AmountBase, Amount: domain.FormatUnits(&p.AmountBase.Int, p.Decimals), AmountCents: p.AmountCents,
			State: p.State, Late: p.Late, Confirmations: confirmations(tip, p.BlockHeight)})
	}
	return out
}

// accessJSON is the access row with what only its owner's view needs:
// whether a generated key exists, the sealed Jupyter token, the database's
// time (the key's display window).
type accessJSON struct {
	Host              string     `json:"host"`
	Port              int        `json:"port"`
	Username          string     `json:"username"`
	Password          string     `json:"password"`
	PrivateKeyShownAt *time.Time `json:"private_key_shown_at"`
	KeyFingerprint    *string    `json:"key_fingerprint"`
	JupyterURL        *string    `json:"jupyter_url"`
	GPUModel          string     `json:"gpu_model_seen"`
	GPUCount          int        `json:"gpu_count_seen"`
	Driver            string     `json:"driver_version"`
	CUDA              string     `json:"cuda_version"`
	Notes             string     `json:"notes"`
	CreatedAt         time.Time  `json:"created_at"`
	RevokedAt         *time.Time `json:"revoked_at"`
	HasKey            bool       `json:"has_key"`
	JupyterToken      *string    `json:"jupyter_token"`
	Now               time.Time  `json:"now"`
}

func (a accessJSON) access() domain.Access {
	return domain.Access{Host: a.Host, Port: a.Port, Username: a.Username, Password: a.Password,
		PrivateKeyShownAt: a.PrivateKeyShownAt, KeyFingerprint: a.KeyFingerprint, JupyterURL: a.JupyterURL,
		GPUModel: a.GPUModel, GPUCount: a.GPUCount, Driver: a.Driver, CUDA: a.CUDA, Notes: a.Notes,
		CreatedAt: a.CreatedAt, RevokedAt: a.RevokedAt}
}

// decodedOrder is an owner statement's row decoded; the access row apart
// (nil while there is none), its secrets still sealed.
type decodedOrder struct {
	rec      domain.OrderRecord
	access   *accessJSON
	payments []paymentJSON
}

// ownerOrder runs ownerOrderSQL and decodes its parts.
func (db *DB) ownerOrder(ctx context.Context, ref string, accountID int64) (decodedOrder, error) {
	return withCachedTimeline(db, ref, func(n, maxID int64) (*orderRecordRow, error) {
		var row orderRecordRow
		err := db.getPrepared(ctx, &row, ownerOrderSQL, ref, accountID, n, maxID)
		return &row, err
	})
}

// withCachedTimeline runs read (an owner statement) with the cached
// timeline's key and decodes its row, the cached timeline standing in when
// the statement sent none. An entry dropped meanwhile makes it read again
// without.
func withCachedTimeline(db *DB, ref string, read func(n, maxID int64) (*orderRecordRow, error)) (decodedOrder, error) {
	n, maxID := db.timelines.key(ref)
	for {
		row, err := read(n, maxID)
		if err != nil {
			return decodedOrder{}, fmt.Errorf("order %s: %w", ref, notFound(err))
		}
		if row.Timeline == nil {
			events, ok := db.timelines.get(ref, row.TimelineN, row.TimelineMax)
			if !ok {
				n, maxID = -1, -1
				continue
			}
			return row.decode(ref, events)
		}
		d, err := row.decode(ref, nil)
		if err == nil {
			db.timelines.put(ref, cachedTimeline{n: row.TimelineN, maxID: row.TimelineMax, events: d.rec.Timeline})
		}
		return d, err
	}
}

// decode turns the row's JSON parts into the record (its Payments left to
// whoever counts their confirmations: payments); cached is the timeline
// when the row carries none.
func (row *orderRecordRow) decode(ref string, cached []domain.TimelineEvent) (decodedOrder, error) {
	d := decodedOrder{rec: domain.OrderRecord{Order: row.Order, Timeline: cached}}
	var intents []intentJSON
	decode := func(raw []byte, into any) error {
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("order %s: decode: %w", ref, err)
		}
		return nil
	}
	if err := decode(row.Intents, &intents); err != nil {
		return decodedOrder{}, err
	}
	if err := decode(row.Payments, &d.payments); err != nil {
		return decodedOrder{}, err
	}
	if cached == nil {
		var events []timelineJSON
		if err := decode(row.Timeline, &events); err != nil {
			return decodedOrder{}, err
		}
		d.rec.Timeline = make([]domain.TimelineEvent, len(events))
		for i, e := range events {
			d.rec.Timeline[i] = domain.TimelineEvent{ID: e.ID, Ref: ref, Kind: e.Kind, Message: e.Message, At: e.At}
			if len(e.Data) > 0 && string(e.Data) != "null" {
				d.rec.Timeline[i].Data = e.Data
			}
		}
	}
	d.rec.Intents = make([]domain.Intent, len(intents))
	for i, in := range intents {
		d.rec.Intents[i] = domain.Intent{ID: in.ID, TargetKind: in.TargetKind, TargetRef: in.TargetRef, AccountID: in.AccountID,
			Asset: in.Asset, Network: in.Network, Decimals: in.Decimals, AmountBase: in.AmountBase,
			Amount: domain.FormatUnits(&in.AmountBase.Int, in.Decimals), USDCents: in.USDCents, Rate: in.Rate,
			RateSource: in.RateSource, RateAt: in.RateAt, Address: in.Address, DerivationIndex: in.DerivationIndex,
			ReferenceKey: in.ReferenceKey, TokenContract: in.TokenContract, PaymentURI: in.PaymentURI,
			Deadline: in.Deadline, WatchUntil: in.WatchUntil, Status: in.Status, CreatedAt: in.CreatedAt, Claims: in.Claims}
	}
	if row.Status == domain.StatusAwaitingPayment || row.Status == domain.StatusPaymentDetected {
		d.rec.MachineHold = &domain.MachineHold{}
		if len(row.Hold) > 0 {
			if err := decode(row.Hold, d.rec.MachineHold); err != nil {
				return decodedOrder{}, err
			}
		}
	}
	if len(row.Access) == 0 {
		return d, nil
	}
	d.access = new(accessJSON)
	if err := json.Unmarshal(row.Access, d.access); err != nil {
		return decodedOrder{}, fmt.Errorf("order %s: decode access: %w", ref, err)
	}
	return d, nil
}

// OwnerOrder returns the order if accountID owns it (ErrNotFound otherwise,
// as OrderForAccount), with its timeline, payment requests, payments seen
// and access, in one round trip. The access is as its owner sees it:
// password and Jupyter token opened; of a generated private key only
// whether it can still be revealed (RevealPrivateKey). Without a keyring,
// sealed secrets are left out. It reads and changes nothing: a GET, which
// a cross-site navigation can trigger, must not start the key's window.
func (s *Store) OwnerOrder(ctx context.Context, ref string, accountID int64) (domain.OrderRecord, error) {
	d, err := s.ownerOrder(ctx, ref, accountID)
	if err != nil {
		return domain.OrderRecord{}, err
	}
	d.rec.Payments = payments(d.payments, nil)
	return s.withAccess(d.rec, d.access)
}

func (s *Store) withAccess(rec domain.OrderRecord, a *accessJSON) (domain.OrderRecord, error) {
	if a == nil {
		return rec, nil
	}
	acc := a.access()
	if err := s.openPassword(rec.Order.Ref, &acc); err != nil {
		return domain.OrderRecord{}, err
	}
	if s.Keyring == nil {
		rec.Access = &acc
		return rec, nil
	}
	var jupyter sql.NullString
	if a.JupyterToken != nil {
		jupyter = sql.NullString{String: *a.JupyterToken, Valid: true}
	}
	if err := s.ownerView(rec.Order.Ref, &acc, a.HasKey, jupyter, a.Now); err != nil {
		return domain.OrderRecord{}, err
	}
	rec.Access = &acc
	return rec, nil
}
