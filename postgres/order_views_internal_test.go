package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A read that began before an invalidation of its order, or before the
// cache was emptied, does not fill it; one that began after does. Nothing
// is read or filled while no listener answered lately.
func TestOrderViewsRefuseFillsOfEarlierReads(t *testing.T) {
	var c orderViews
	key := viewKey("KD-1", false)
	v := &cachedView{accountID: 1}
	invalidate := func(ref string) { invalidateView(&c, ref) }

	at, got, _ := c.begin(key)
	require.Nil(t, got)
	c.put(key, at, v)
	_, got, _ = c.begin(key)
	require.Nil(t, got, "no listener answered: nothing cached")

	c.alive(time.Now())
	at, _, _ = c.begin(key)
	invalidate("KD-1")
	c.put(key, at, v)
	_, got, _ = c.begin(key)
	require.Nil(t, got, "filled by a read older than the invalidation")

	at, _, _ = c.begin(key)
	invalidate("KD-2") // another order's change
	c.put(key, at, v)
	_, got, _ = c.begin(key)
	require.Same(t, v, got)

	at, _, _ = c.begin(key)
	c.empty()
	c.put(key, at, v)
	_, got, _ = c.begin(key)
	require.Nil(t, got, "filled by a read older than the emptying")

	old, _, _ := c.begin(key)
	at, _, _ = c.begin(key)
	c.put(key, at, v)
	c.put(key, old-1, &cachedView{accountID: 2})
	_, got, _ = c.begin(key)
	require.Same(t, v, got, "an older read replaced a newer one")

	invalidate(AllViews)
	_, got, _ = c.begin(key)
	require.Nil(t, got)
	at, _, _ = c.begin(key)
	c.put(key, at, v)
	c.dead()
	_, got, _ = c.begin(key)
	require.Nil(t, got)
	c.alive(time.Now().Add(-time.Second)) // a ping sent before the loss
	at, _, _ = c.begin(key)
	c.put(key, at, v)
	_, got, _ = c.begin(key)
	require.Nil(t, got, "a ping sent before a lost connection kept the cache in use")
	c.alive(time.Now())
	_, got, _ = c.begin(key)
	require.Nil(t, got, "a lost connection empties the cache")
}
