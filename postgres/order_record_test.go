package postgres_test

import (
	"context"
	"testing"

	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// The owner's read keeps the timeline it last read per order and has the
// statement skip it while unchanged; any new event shows at the next read,
// also one committed late with a smaller id than events already read
// (ids come from a sequence, commits in any order).
func TestOwnerOrderTimelineCacheSeesEveryNewEvent(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := seedAccount(t, db, "cache@example.com")
	ref := seedOrder(t, db, acc, 1)
	insert := func(key string, id int64) {
		t.Helper()
		q := `INSERT INTO timeline_events (ref, idem_key, kind, message) VALUES ($1, $2, 'note', $2)`
		args := []any{ref, key}
		if id > 0 {
			q = `INSERT INTO timeline_events (id, ref, idem_key, kind, message) VALUES ($3, $1, $2, 'note', $2)`
			args = append(args, id)
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []string {
		t.Helper()
		rec, err := postgres.NewStore(db, nil, "").OwnerOrder(ctx, ref, acc)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, ev := range rec.Timeline {
			keys = append(keys, ev.Message)
		}
		return keys
	}
	insert("a", 1_000_000)
	insert("b", 1_000_010)
	if got := read(); len(got) != 2 {
		t.Fatalf("first read: %v", got)
	}
	if got := read(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("cached read: %v", got)
	}
	insert("late", 1_000_005) // committed after "b" was read, with a smaller id
	if got := read(); len(got) != 3 || got[1] != "late" {
		t.Fatalf("after a late commit: %v, want a, late, b", got)
	}
	insert("c", 1_000_020)
	if got := read(); len(got) != 4 || got[3] != "c" {
		t.Fatalf("after a new event: %v", got)
	}
	if _, err := postgres.NewStore(db, nil, "").OwnerOrder(ctx, ref, acc+1); err == nil {
		t.Fatal("another account read the order (from the cache)")
	}
}
