package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/rates"
)

// Support's value of another asset is bounded by the rate observed when it
// came in: off it, 422 value_out_of_bounds with the range and the rate in
// French, recorded as rejected, nothing changed; within it, valued. (With
// no rate observed, see postgres' TestValueWithoutRateNeedsApproval.)
func TestSupportValueBoundedByTheRate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ref := h.order(h.register("bound@example.com"))
	require.NoError(t, h.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: "other-asset-bound", Kind: domain.EventPaymentToSupport,
		Message: "USDT reçu à l'adresse d'une demande en ETH : transmis au support.", At: time.Now(),
		Exceptions: []domain.NewException{{Reason: domain.ExceptionOtherAsset, PaymentKey: "ethereum:boundtx:0", Network: "ethereum",
			TxID: "boundtx", Asset: "USDT", AmountBase: "5000000"}}}))
	var id string
	require.NoError(t, h.db.Get(&id, `SELECT id::text FROM payment_exceptions WHERE needs_value`))
	value := func(cents int64) resp {
		return h.do("POST", "/v1/support/exceptions/"+id+"/value", map[string]any{"reason": "cours du jour", "amount_cents": cents},
			auth{bearer: agentToken})
	}

	require.NoError(t, h.db.RecordRate(ctx, rates.Rate{Asset: "USDT", USDPerUnit: decimal.NewFromInt(1), Source: "kraken", At: time.Now()}))
	r := value(600)
	require.Equal(t, http.StatusUnprocessableEntity, r.Code, r.Body.String())
	require.Equal(t, "value_out_of_bounds", r.errCode())
	require.Contains(t, r.Body.String(), "valent de 4.90 à 5.10 USD au cours de 1 USD par USDT (kraken")
	require.Equal(t, "rejected", r.obj("action")["outcome"])
	var needs bool
	require.NoError(t, h.db.Get(&needs, `SELECT needs_value FROM payment_exceptions WHERE id = $1::bigint`, id))
	require.True(t, needs, "nothing changed")

	r = value(500)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.NoError(t, h.db.Get(&needs, `SELECT needs_value FROM payment_exceptions WHERE id = $1::bigint`, id))
	require.False(t, needs)
}
