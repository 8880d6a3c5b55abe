package postgres_test

import (
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
