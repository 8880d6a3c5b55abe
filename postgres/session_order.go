package postgres

// A session's read of one of its orders: one statement for the session and
// the order's view, or, while the view is cached (order_views.go), the
// session's statement alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// sessionOrderSQL reads the account and CSRF token of the unexpired
// session $1 (as SessionAccount) and that account's order $2, in one
// statement: no row when either is missing.
var sessionOrderSQL = sessionOrderSelect("")

// sessionOrderPageSQL is sessionOrderSQL with what only the order's page
// shows: the account's support requests on the order and its latest key
// change (in the same round trip: the page read them apart before).
var sessionOrderPageSQL = sessionOrderSelect(`,
	(SELECT json_agg(json_build_object('id', r.id, 'order_reference', r.order_ref, 'message', r.message,
			'launch_command', r.launch_command, 'versions', r.versions, 'first_error', r.first_error,
			'status', r.status, 'created_at', r.created_at) ORDER BY r.id)
		FROM support_requests r WHERE r.order_ref = v.ref AND r.account_id = a.id) AS support_json,
	(SELECT json_build_object('id', k.id, 'order_reference', k.order_ref, 'kind', k.kind, 'state', k.state,
			'failure', k.failure, 'created_at', k.created_at, 'done_at', k.done_at)
		FROM access_key_requests k WHERE k.order_ref = v.ref ORDER BY k.id DESC LIMIT 1) AS key_json`)

// sessionOrderSelect reads a valid session's account with one of its
// orders as ownerOrderSelect does, and the columns more.
func sessionOrderSelect(more string) string {
	return `
	WITH ` + touchSession + `
	SELECT ` + sessionAccountColumns + `, v.*` + more + `
	FROM sessions s JOIN accounts a ON a.id = s.account_id
	CROSS JOIN LATERAL (` + ownerOrderSelect(`ref = $2 AND account_id = a.id`, `$3`, `$4`) + `) v
	WHERE s.token_hash = $1 AND ` + liveSession
}

// sessionAccountColumns are a session s's account a as sessionAccountRow.
const sessionAccountColumns = `a.id AS session_account_id, a.first_name, a.last_name, a.email,
	a.created_at AS account_created_at, a.email_verified_at IS NOT NULL AS email_verified, s.csrf_token`

// sessionViewSQL is what a read of a cached view asks: the session $1 as
// sessionOrderSQL checks it and the database's time; sessionViewTipsSQL
// adds every network's tip (a JSON object), for a view with a payment in
// a block. Neither takes another parameter, so that PostgreSQL keeps one
// generic plan for each instead of planning them at every read.
var (
	sessionViewSQL     = sessionViewSelect(`NULL::json`)
	sessionViewTipsSQL = sessionViewSelect(allTips())
)

func sessionViewSelect(tips string) string {
	return `
	WITH ` + touchSession + `
	SELECT ` + sessionAccountColumns + `, now() AS now, ` + tips + ` AS tips_json,
		LEAST(s.expires_at, s.last_used_at + s.idle_timeout, s.last_used_at + interval '` +
		fmt.Sprint(int(SessionTouchEvery.Seconds())) + ` seconds') AS session_until
	FROM sessions s JOIN accounts a ON a.id = s.account_id
	WHERE s.token_hash = $1 AND ` + liveSession
}

// allTips is a JSON object of the tip of every network the shop takes
// payments on (the domain's constant names, written into the statement).
func allTips() string {
	var parts []string
	for _, m := range domain.Methods {
		part := `'` + m.Network + `', ` + tipOf(`'`+m.Network+`'`)
		if !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return `json_build_object(` + strings.Join(parts, ", ") + `)`
}

// SessionOrder is SessionAccount and OwnerOrder (of the session's account)
// in one round trip, with the access as OwnerOrder gives it. ErrNotFound
// when the session is not valid or the order not the account's
// (SessionAccount tells which).
//
// While a TimelineListener runs, the order's view is cached (orderViews):
// an order that did not change since the last read costs only the
// session's statement, which also reads the time and, for a view with a
// payment in a block, the chains' tips (confirmations move with them).
func (s *Store) SessionOrder(ctx context.Context, tokenHash []byte, ref string) (domain.SessionOrder, error) {
	return s.sessionOrder(ctx, false, tokenHash, ref)
}

// SessionOrderPage is SessionOrder with what only the order's page shows
// (its Page), in the same round trip.
func (s *Store) SessionOrderPage(ctx context.Context, tokenHash []byte, ref string) (domain.SessionOrder, error) {
	return s.sessionOrder(ctx, true, tokenHash, ref)
}

func (s *Store) sessionOrder(ctx context.Context, page bool, tokenHash []byte, ref string) (domain.SessionOrder, error) {
	key := viewKey(ref, page)
	at, v, cached := s.views.begin(key)
	if cached {
		so, ok, err := s.cachedSessionOrder(ctx, v, tokenHash)
		if err != nil || ok {
			return so, err
		}
	}
	db := s.DB
	query := sessionOrderSQL
	if page {
		query = sessionOrderPageSQL
	}
	var row sessionOrderRow
	d, err := withCachedTimeline(db, ref, func(n, maxID int64) (*orderRecordRow, error) {
		row = sessionOrderRow{}
		err := db.getPrepared(ctx, &row, query, tokenHash, ref, n, maxID)
		return &row.orderRecordRow, err
	})
	if err != nil {
		return domain.SessionOrder{}, fmt.Errorf("session %w", err)
	}
	v = &cachedView{accountID: row.AccountID, rec: d.rec, payments: d.payments, access: d.access}
	if page {
		if v.page, err = row.pageParts(ref); err != nil {
			return domain.SessionOrder{}, err
		}
	}
	if v.cacheable() {
		s.views.put(key, at, v)
	}
	return s.fromView(v, row.sessionAccountRow, nil, nil)
}

// cacheable tells whether v may be cached, and sets what its reads need:
// whether the tips count (a payment in a block), and when it changes with
// the clock alone.
func (v *cachedView) cacheable() bool {
	o := v.rec.Order
	if o.Status == domain.StatusWaitingForMachine {
		return false // its place in the line moves with other orders
	}
	if o.Status == domain.StatusAwaitingPayment && v.rec.MachineHold != nil && v.rec.MachineHold.Held {
		if v.rec.MachineHold.Until == nil {
			return false
		}
		v.expires = *v.rec.MachineHold.Until // live_capacity_holds drops it then
	}
	v.inBlock = slices.ContainsFunc(v.payments, func(p paymentJSON) bool { return p.BlockHeight != nil })
	return true
}

// cachedSessionOrder is the session's order from the cached view v: with
// the session cached too (and no tips or clock to read for v), from
// memory; else the session's statement (which also reads the time and, for
// a view with a payment in a block, the tips) caches the session. ok false
// when v changed with the clock meanwhile.
func (s *Store) cachedSessionOrder(ctx context.Context, v *cachedView, tokenHash []byte) (so domain.SessionOrder, ok bool, err error) {
	ref := v.rec.Order.Ref
	key := sessionKey(tokenHash)
	at, sess, cached := s.sessions.begin(key)
	if cached && !v.inBlock && v.expires.IsZero() {
		if now := time.Now(); now.Before(sess.until) {
			if sess.row.AccountID != v.accountID {
				return so, false, fmt.Errorf("session order %s: %w", ref, domainNotFound)
			}
			so, err = s.fromView(v, sess.row, nil, &now)
			return so, err == nil, err
		}
	}
	var row struct {
		sessionAccountRow
		Now   time.Time `db:"now"`
		Tips  []byte    `db:"tips_json"`
		Until time.Time `db:"session_until"`
	}
	query := sessionViewSQL
	if v.inBlock {
		query = sessionViewTipsSQL
	}
	sent := time.Now()
	if err := s.getPrepared(ctx, &row, query, tokenHash); err != nil {
		return so, false, fmt.Errorf("session order %s: %w", ref, notFound(err))
	}
	if until := sent.Add(row.Until.Sub(row.Now)); until.After(sent) {
		s.sessions.put(key, at, &cachedSession{row: row.sessionAccountRow, until: until})
	}
	if row.AccountID != v.accountID {
		return so, false, fmt.Errorf("session order %s: %w", ref, domainNotFound)
	}
	if !v.expires.IsZero() && !row.Now.Before(v.expires) {
		return so, false, nil
	}
	tips := map[string]*int64{}
	if len(row.Tips) > 0 {
		if err := json.Unmarshal(row.Tips, &tips); err != nil {
			return so, false, fmt.Errorf("session order %s: tips: %w", ref, err)
		}
	}
	so, err = s.fromView(v, row.sessionAccountRow, tips, &row.Now)
	return so, err == nil, err
}

// fromView is the session's order from its view v: confirmations counted
// from tips (nil: those v was read with), the access's key window from now
// (nil: the time v was read at).
func (s *Store) fromView(v *cachedView, sess sessionAccountRow, tips map[string]*int64, now *time.Time) (domain.SessionOrder, error) {
	rec := v.rec
	rec.Payments = payments(v.payments, tips)
	var a *accessJSON
	if v.access != nil {
		c := *v.access
		if now != nil {
			c.Now = *now
		}
		a = &c
	}
	rec, err := s.withAccess(rec, a)
	if err != nil {
		return domain.SessionOrder{}, err
	}
	return domain.SessionOrder{CSRFToken: sess.CSRFToken, Order: rec, Account: sess.account(), Page: v.page}, nil
}

// sessionAccountRow is a session's account (sessionAccountColumns).
type sessionAccountRow struct {
	AccountID        int64     `db:"session_account_id"`
	FirstName        string    `db:"first_name"`
	LastName         string    `db:"last_name"`
	Email            string    `db:"email"`
	AccountCreatedAt time.Time `db:"account_created_at"`
	EmailVerified    bool      `db:"email_verified"`
	CSRFToken        string    `db:"csrf_token"`
}

func (r sessionAccountRow) account() domain.Account {
	return domain.Account{ID: r.AccountID, FirstName: r.FirstName, LastName: r.LastName, Email: r.Email,
		CreatedAt: r.AccountCreatedAt, EmailVerified: r.EmailVerified}
}

// sessionOrderRow is one row of sessionOrderSQL.
type sessionOrderRow struct {
	sessionAccountRow
	orderRecordRow
	// Support and KeyRequest: sessionOrderPageSQL's only (NULL: none).
	Support    []byte `db:"support_json"`
	KeyRequest []byte `db:"key_json"`
}

// pageParts decodes what sessionOrderPageSQL adds.
func (row *sessionOrderRow) pageParts(ref string) (*domain.OrderPageParts, error) {
	p := &domain.OrderPageParts{SupportRequests: []domain.SupportRequest{}}
	if row.Support != nil {
		if err := json.Unmarshal(row.Support, &p.SupportRequests); err != nil {
			return nil, fmt.Errorf("order %s: support requests: %w", ref, err)
		}
		for i := range p.SupportRequests {
			p.SupportRequests[i].AccountID = row.sessionAccountRow.AccountID
		}
	}
	if row.KeyRequest != nil {
		p.KeyRequest = &domain.KeyRequest{}
		if err := json.Unmarshal(row.KeyRequest, p.KeyRequest); err != nil {
			return nil, fmt.Errorf("order %s: key request: %w", ref, err)
		}
	}
	return p, nil
}
