package memo

import "sync"

// Memo holds what was made under each Key, up to a bound (full, it is
// emptied: an entry costs one making to come back). Safe for concurrent
// use; what it holds is shared by its readers and must not be changed.
type Memo[T any] struct {
	mu  sync.Mutex
	m   map[Key]T
	max int
}

// New is a Memo of at most max entries.
func New[T any](max int) *Memo[T] { return &Memo[T]{max: max} }

// Get is what was made under k, if remembered.
func (m *Memo[T]) Get(k Key) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.m[k]
	return t, ok
}

// Put remembers t under k.
func (m *Memo[T]) Put(k Key, t T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= m.max {
		m.m = make(map[Key]T, min(m.max, 256))
	}
	m.m[k] = t
}

// Len is the number of entries (tests, metrics).
func (m *Memo[T]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
