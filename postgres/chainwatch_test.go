package postgres_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// A payment dropped from the mempool and mined after all while the
// reversal's signal was in flight: the late acknowledgement of the reversal does not
// hide the newer state, which is sent too (the acknowledgement used to
// match on the state alone, and the payment stayed "seen" as first
// delivered, the workflow having dropped it).
func TestNewerStateSentAfterAnOlderOneIsAcknowledged(t *testing.T) {
	ctx, db, _, _ := leasedIntent(t, "states@example.com", "PI-STATES", "bc1qstates", 905)
	seen := chainwatch.Seen{TxID: "rbf2", Asset: "BTC", Address: "bc1qstates", Amount: big.NewInt(36262)}
	pending := func() []chainwatch.Pending {
		t.Helper()
		ps, err := db.Unsignaled(ctx, "bitcoin", nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	if err := db.RecordMempool(ctx, "bitcoin", "w", []chainwatch.Seen{seen}); err != nil {
		t.Fatal(err)
	}
	ps := pending()
	if len(ps) != 1 || ps[0].State != chainwatch.StateSeen || ps[0].StateVersion != 1 {
		t.Fatalf("first sighting: %+v", ps)
	}
	if err := db.MarkSignaled(ctx, ps[0]); err != nil {
		t.Fatal(err)
	}
	if err := db.RevertMempool(ctx, "bitcoin", "w", "rbf2"); err != nil {
		t.Fatal(err)
	}
	inFlight := pending()
	if len(inFlight) != 1 || inFlight[0].State != chainwatch.StateReverted || inFlight[0].StateVersion != 2 {
		t.Fatalf("dropped: %+v", inFlight)
	}
	mined := seen
	mined.BlockHeight, mined.BlockHash, mined.BlockTime = 40, "h40", time.Now()
	if err := db.RecordBlock(ctx, "bitcoin", "w", 40, "h40", []chainwatch.Seen{mined}); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkSignaled(ctx, inFlight[0]); err != nil { // the reversal's acknowledgement, late
		t.Fatal(err)
	}
	ps = pending()
	if len(ps) != 1 || ps[0].State != chainwatch.StateSeen || ps[0].StateVersion != 3 {
		t.Fatalf("seen again after the reversal was sent: %+v, want the seen state (version 3) still to send", ps)
	}
}

// A block holding payments in every stored state, and a new one: the
// mempool's payment moves into the block, the dropped one is seen again
// (a new state to send), the confirmed one (a block read again) keeps its
// block, and the new one is stored. RecordBlock moves the stored ones in
// one statement, the new one as before.
func TestBlockRecordsEveryStoredState(t *testing.T) {
	ctx, db, _, _ := leasedIntent(t, "mixed@example.com", "PI-MIXED", "bc1qmixed", 906)
	pay := func(txid string) chainwatch.Seen {
		return chainwatch.Seen{TxID: txid, Asset: "BTC", Address: "bc1qmixed", Amount: big.NewInt(9000)}
	}
	inBlock := func(s chainwatch.Seen, h int64) chainwatch.Seen {
		s.BlockHeight, s.BlockHash, s.BlockTime = h, fmt.Sprint("h", h), time.Now()
		return s
	}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 50, "h50", []chainwatch.Seen{inBlock(pay("old"), 50)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Confirm(ctx, "bitcoin", "w", 50); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordMempool(ctx, "bitcoin", "w", []chainwatch.Seen{pay("pool"), pay("dropped")}); err != nil {
		t.Fatal(err)
	}
	if err := db.RevertMempool(ctx, "bitcoin", "w", "dropped"); err != nil {
		t.Fatal(err)
	}
	block := []chainwatch.Seen{inBlock(pay("new"), 51), inBlock(pay("pool"), 51), inBlock(pay("dropped"), 51), inBlock(pay("old"), 51)}
	if err := db.RecordBlock(ctx, "bitcoin", "w", 51, "h51", block); err != nil {
		t.Fatal(err)
	}
	type row struct {
		TxID     string `db:"txid"`
		State    string `db:"state"`
		Version  int    `db:"state_version"`
		Height   int64  `db:"block_height"`
		Mempool  bool   `db:"mempool"`
		Reverted bool   `db:"reverted"`
	}
	var rows []row
	if err := db.Select(&rows, `SELECT txid, state, state_version, block_height, mempool, reverted_at IS NOT NULL AS reverted
		FROM chain_payments WHERE network = 'bitcoin' ORDER BY txid`); err != nil {
		t.Fatal(err)
	}
	got := map[string]row{}
	for _, r := range rows {
		got[r.TxID] = r
	}
	want := map[string]row{
		"dropped": {TxID: "dropped", State: "seen", Version: 3, Height: 51},
		"new":     {TxID: "new", State: "seen", Version: 1, Height: 51},
		"old":     {TxID: "old", State: "confirmed", Version: 2, Height: 50},
		"pool":    {TxID: "pool", State: "seen", Version: 1, Height: 51},
	}
	if len(got) != len(want) {
		t.Fatalf("payments %+v, want %+v", rows, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
}
