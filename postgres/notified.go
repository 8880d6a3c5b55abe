package postgres

import (
	"slices"
	"sync"
	"time"
)

// notifiedSize bounds a notified cache; full, it is emptied (an entry
// costs one full read to come back).
const notifiedSize = 20_000

// viewAliveFor is how long a listener's answered ping keeps the caches in
// use: a connection that died silently stops notifications, and a cache
// must stop being read before a change it missed could matter.
const viewAliveFor = 1500 * time.Millisecond

// notified caches what reads decoded from tables that announce their
// changes (NOTIFY), by a name the notifications carry. It is correct only
// while a TimelineListener hears them: it is used while one answered a
// ping within viewAliveFor, and emptied on every (re)connection, when the
// notifications of the gap are lost. The order views (order_views.go) and
// the sessions (session_cache.go) are two.
//
// A read that began before an invalidation of its entry must not fill the
// cache with what it read: the statement may predate the change. Each
// invalidation is numbered (seq) and leaves a mark; a fill carries the
// number current when its read began (begin) and is refused below a mark
// of its key or below floor (the last emptying).
type notified[V any] struct {
	mu      sync.Mutex
	m       map[string]notifiedEntry[V]
	seq     uint64
	floor   uint64
	aliveTo time.Time
	deadAt  time.Time // a ping sent before it proves nothing
}

// notifiedEntry is a cached value, or only the mark of an invalidation at
// seq (set false).
type notifiedEntry[V any] struct {
	at  uint64
	v   V
	set bool
}

// begin returns the number a fill from a read beginning now must carry,
// and the value cached under key if the cache may be read.
func (c *notified[V]) begin(key string) (at uint64, v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !time.Now().Before(c.aliveTo) {
		return c.seq, v, false
	}
	e := c.m[key]
	return c.seq, e.v, e.set
}

// put caches v under key unless an invalidation came after the read began
// (at).
func (c *notified[V]) put(key string, at uint64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !time.Now().Before(c.aliveTo) || at < c.floor {
		return
	}
	if e, ok := c.m[key]; ok && e.at > at {
		return
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= notifiedSize {
		c.emptyLocked()
	}
	if c.m == nil {
		c.m = map[string]notifiedEntry[V]{}
	}
	c.m[key] = notifiedEntry[V]{at: at, v: v, set: true}
}

// invalidate forgets the entries under keys (AllViews among them: every
// entry).
func (c *notified[V]) invalidate(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if slices.Contains(keys, AllViews) || len(c.m)+len(keys) > notifiedSize {
		c.emptyLocked()
		return
	}
	if c.m == nil {
		c.m = map[string]notifiedEntry[V]{}
	}
	for _, k := range keys {
		c.m[k] = notifiedEntry[V]{at: c.seq}
	}
}

// empty forgets every entry, and refuses the fills of reads begun before.
func (c *notified[V]) empty() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.emptyLocked()
}

func (c *notified[V]) emptyLocked() {
	c.seq++
	c.floor = c.seq
	c.m = nil
}

// alive records a listener's answered ping, sent at at: the cache may be
// used until viewAliveFor after it, unless a connection was lost since.
func (c *notified[V]) alive(at time.Time) {
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
func (c *notified[V]) dead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aliveTo, c.deadAt = time.Time{}, time.Now()
	c.emptyLocked()
}

// listened are the caches one listener keeps true: emptied, kept alive and
// stopped together.
type listened []interface {
	empty()
	alive(at time.Time)
	dead()
}

func (l listened) empty() {
	for _, c := range l {
		c.empty()
	}
}

func (l listened) alive(at time.Time) {
	for _, c := range l {
		c.alive(at)
	}
}

func (l listened) dead() {
	for _, c := range l {
		c.dead()
	}
}
