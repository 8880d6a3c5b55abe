package postgres

import (
	"sync"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// OrderViewChannel is the PostgreSQL NOTIFY channel on which every table
// of the owner's order view announces a change with the order's reference
// (migration 00073), or AllViews for a change every view shows.
const OrderViewChannel = "order_view"

// AllViews is the reference notified when every cached view is out of date.
const AllViews = "*"

// orderViewsSize bounds the cache; full, it is emptied (a view costs one
// full read to come back).
const orderViewsSize = 20_000

// viewAliveFor is how long a listener's answered ping keeps the cache in
// use: a connection that died silently stops notifications, and the cache
// must stop being read before a change it missed could matter.
const viewAliveFor = 1500 * time.Millisecond

// orderViews caches, per order, the owner's view as the session read last
// decoded it, so that a read whose order did not change runs only the
// session's statement. It is correct only while a TimelineListener hears
// the order_view notifications: it is used while one answered a ping
// within viewAliveFor, and emptied on every (re)connection, when the
// notifications of the gap are lost.
//
// A read that began before an invalidation of its order must not fill the
// cache with what it read: the statement may predate the change. Each
// invalidation is numbered (seq) and leaves a mark; a fill carries the
// number current when its read began (begin) and is refused below a mark
// of its order or below floor (the last emptying).
type orderViews struct {
	mu      sync.Mutex
	m       map[viewKey]viewEntry
	seq     uint64
	floor   uint64
	aliveTo time.Time
	deadAt  time.Time // a ping sent before it proves nothing
}

type viewKey struct {
	ref  string
	page bool // with the page's parts (SessionOrderPage)
}

// viewEntry is a cached view, or only the mark of an invalidation at seq
// (view nil).
type viewEntry struct {
	at   uint64
	view *cachedView
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

// begin returns the number a fill from a read beginning now must carry,
// and the cached view of key if the cache may be read.
func (c *orderViews) begin(key viewKey) (uint64, *cachedView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !time.Now().Before(c.aliveTo) {
		return c.seq, nil
	}
	return c.seq, c.m[key].view
}

// put caches v under key unless an invalidation came after the read began
// (at).
func (c *orderViews) put(key viewKey, at uint64, v *cachedView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !time.Now().Before(c.aliveTo) || at < c.floor {
		return
	}
	if e, ok := c.m[key]; ok && e.at > at {
		return
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= orderViewsSize {
		c.emptyLocked()
	}
	if c.m == nil {
		c.m = map[viewKey]viewEntry{}
	}
	c.m[key] = viewEntry{at: at, view: v}
}

// invalidate forgets the views of ref (AllViews: every view).
func (c *orderViews) invalidate(ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref == AllViews {
		c.emptyLocked()
		return
	}
	c.seq++
	if len(c.m)+2 > orderViewsSize {
		c.emptyLocked()
		return
	}
	if c.m == nil {
		c.m = map[viewKey]viewEntry{}
	}
	c.m[viewKey{ref, false}] = viewEntry{at: c.seq}
	c.m[viewKey{ref, true}] = viewEntry{at: c.seq}
}

// empty forgets every view, and refuses the fills of reads begun before.
func (c *orderViews) empty() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.emptyLocked()
}

func (c *orderViews) emptyLocked() {
	c.seq++
	c.floor = c.seq
	c.m = nil
}

// alive records a listener's answered ping, sent at at: the cache may be
// used until viewAliveFor after it, unless a connection was lost since.
func (c *orderViews) alive(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.Before(c.deadAt) {
		return
	}
	if t := at.Add(viewAliveFor); t.After(c.aliveTo) {
		c.aliveTo = t
	}
}

// dead stops the cache's use at once and empties it (a listener lost its
// connection: notifications may be lost until it listens again).
func (c *orderViews) dead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aliveTo, c.deadAt = time.Time{}, time.Now()
	c.emptyLocked()
}

// ForgetOrderViews empties the cached order views: the API calls it after
// each of its own writes, so that a customer reads what they just did
// without waiting for the notification.
func (db *DB) ForgetOrderViews() { db.views.empty() }
