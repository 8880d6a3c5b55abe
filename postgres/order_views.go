package postgres

import (
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// OrderViewChannel is the PostgreSQL NOTIFY channel on which every table
// of the owner's order view announces a change with the order's reference
// (migration 00073), or AllViews for a change every view shows.
const OrderViewChannel = "order_view"

// AllViews is the reference notified when every cached view is out of date.
const AllViews = "*"

// orderViews caches, per order, the owner's view as the session read last
// decoded it, so that a read whose order did not change runs at most the
// session's statement (notified.go: while a listener hears order_view).
type orderViews = notified[*cachedView]

// viewKey is the name a view is cached under: its order's reference, and
// whether it has the page's parts (SessionOrderPage).
func viewKey(ref string, page bool) string {
	if page {
		return ref + "\x00page"
	}
	return ref
}

// invalidateView forgets the views of ref (AllViews: every view).
func invalidateView(c *orderViews, ref string) {
	c.invalidate(viewKey(ref, false), viewKey(ref, true))
}

// cachedView is what a session's read of an order decoded, shared by the
// reads that use it (never changed in place).
type cachedView struct {
	accountID int64
	rec       domain.OrderRecord // Payments and Access are rebuilt per read
	payments  []paymentJSON      // confirmations count from the tips read live
	inBlock   bool               // a payment is in a block: its read needs the tips
	access    *accessJSON
	page      *domain.OrderPageParts
	// expires is when the view changes with the clock alone (a capacity
	// hold's end while the order awaits payment); zero: never.
	expires time.Time
}

// ForgetOrderViews empties the cached order views and sessions: the API
// calls it after each of its own writes, so that a customer reads what they
// just did (a sign-out included) without waiting for the notification.
func (db *DB) ForgetOrderViews() { db.listened().empty() }

// listened are the DB's caches a TimelineListener keeps.
func (db *DB) listened() listened { return listened{&db.views, &db.sessions} }
