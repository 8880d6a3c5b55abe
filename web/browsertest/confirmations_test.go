package browsertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// The open order page follows what no timeline entry announces: a payment
// seen in the mempool that a block then confirms once ("0 confirmation sur
// 2", then "1 confirmation sur 2"), and a payment request's deadline
// passing (the countdown's end fetches the expired state). No node runs:
// the test writes the request, the payment and the block as a watcher
// would, so the order's workflow hears of none of it and nothing else can
// update the page.
func TestOpenPageFollowsConfirmationsAndDeadline(t *testing.T) {
	s := newShop(t, shopOptions{})
	ctx := browser(t)
	s.register(t, ctx, "Ada", "confirmations@example.com")

	ref := s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	intent := s.writeIntent(t, ref, "1 hour")
	s.execSQL(t, `INSERT INTO chain_payments (network, txid, output_index, asset, intent_id, address, amount_base, amount_cents, late, state)
		SELECT network, 'tx-'||id, 0, asset, id, address, amount_base, usd_cents, false, 'seen' FROM payment_intents WHERE id = $1`, intent)
	run(t, ctx, "reload with the payment seen", chromedp.Navigate(s.srv.URL+"/orders/"+ref), visible("#pay-address"))
	waitText(t, ctx, "#paiement .seen-payment .confirmations", fmt.Sprintf("0 confirmation sur %d", ltcConfirmations))
	markUnreloaded(t, ctx)
	s.execSQL(t, `INSERT INTO chain_blocks (network, height, hash) VALUES ('litecoin', 100, 'block-100')`)
	s.execSQL(t, `UPDATE chain_payments SET block_height = 100, block_hash = 'block-100' WHERE intent_id = $1`, intent)
	waitText(t, ctx, "#paiement .seen-payment .confirmations", fmt.Sprintf("1 confirmation sur %d", ltcConfirmations))
	checkUnreloaded(t, ctx)

	ref = s.orderThroughSite(t, ctx, "rtx-a5000", 1, 3)
	s.writeIntent(t, ref, "8 seconds")
	run(t, ctx, "reload with the request", chromedp.Navigate(s.srv.URL+"/orders/"+ref), visible("#pay-address"))
	waitText(t, ctx, "#paiement .countdown", "il reste")
	markUnreloaded(t, ctx)
	waitText(t, ctx, "#paiement .expired", "a expiré")
	if eval[bool](t, ctx, `!!document.querySelector("#pay-address")`) {
		t.Fatal("the expired request's address is still shown")
	}
	checkUnreloaded(t, ctx)
}

// writeIntent writes an open LTC payment request for the order ref, due
// within the PostgreSQL interval, and returns its ID.
func (s *shop) writeIntent(t *testing.T, ref, within string) string {
	t.Helper()
	id := "PI-" + ref
	s.execSQL(t, `INSERT INTO payment_intents (id, target_kind, target_ref, account_id, asset, network, decimals, amount_base,
			usd_cents, rate, rate_source, rate_at, address, derivation_index, payment_uri, deadline, watch_until, request_key)
		SELECT $1, 'order', ref, account_id, 'LTC', 'litecoin', 8, 1000000000 + (SELECT count(*) FROM payment_intents),
			total_cents, 100, 'test', now(), 'rltc1q'||lower(ref), (SELECT count(*) FROM payment_intents), 'litecoin:rltc1q'||lower(ref),
			now() + $2::interval, now() + $2::interval + interval '1 hour', $1
		FROM orders WHERE ref = $3`, id, within, ref)
	return id
}

func (s *shop) execSQL(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := s.env.DB.ExecContext(s.env.Ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// markUnreloaded marks the page; checkUnreloaded fails if it was reloaded
// since (what it shows came live).
func markUnreloaded(t *testing.T, ctx context.Context) {
	t.Helper()
	eval[bool](t, ctx, `window.kdUnreloaded = true`)
}

func checkUnreloaded(t *testing.T, ctx context.Context) {
	t.Helper()
	if !eval[bool](t, ctx, `window.kdUnreloaded === true`) {
		t.Fatal("the page was reloaded")
	}
}
