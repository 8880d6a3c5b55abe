package api_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

const (
	bobToken = "agent-bob-token-0123456789abcdef"
	bobName  = "bob"
)

var bob = auth{bearer: bobToken}

// newFourEyesHarness is a harness with two senior agents (approving is a
// senior's, support_roles_test.go), alice and bob, held to the limits:
// what they refuse each other is the four-eyes rule's.
func newFourEyesHarness(t *testing.T, limits domain.SupportLimits) *harness {
	return newHarness(t, func(c *api.Config, _ *api.Deps) {
		c.AgentTokens = map[string]string{agentToken: agentName, bobToken: bobName}
		c.AgentRoles = map[string]domain.SupportRoles{agentName: {domain.RoleSenior}, bobName: {domain.RoleSenior}}
		c.SupportLimits = limits
	})
}

func actionID(r resp) int64 { return int64(r.obj("action")["id"].(float64)) }

// A refund above the threshold is recorded but not carried out: it waits
// for a second agent (202 awaiting_approval, no workflow call). The agent
// who asked cannot approve it (403 own_action); another agent's approval
// carries it out once, as the one workflow update of that action; a
// second approval is refused. Below the threshold an agent acts alone.
func TestMoneyActionAboveThresholdWaitsForASecondAgent(t *testing.T) {
	h := newFourEyesHarness(t, domain.SupportLimits{FourEyesCents: 100_00, AgentDailyCapCents: 10_000_00})
	ref := h.order(h.register("foureyes@example.com"))
	body := map[string]any{"reason": "geste commercial après panne", "amount_cents": 500_00}

	r := h.do("POST", "/v1/support/orders/"+ref+"/refund", body, agent)
	require.Equal(t, http.StatusAccepted, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeAwaitingApproval, r.errCode())
	id := actionID(r)
	require.Empty(t, h.wf.callsOf("Refund"), "nothing runs before a second agent approves")

	list := h.do("GET", "/v1/support/actions/awaiting-approval", nil, bob)
	require.Equal(t, http.StatusOK, list.Code, list.Body.String())
	require.Len(t, list.body["actions"], 1)

	own := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(id, 10)+"/approve", map[string]any{"reason": "je confirme"}, agent)
	require.Equal(t, http.StatusForbidden, own.Code, own.Body.String())
	require.Equal(t, domain.ECodeOwnAction, own.errCode())
	require.Empty(t, h.wf.callsOf("Refund"))

	ok := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(id, 10)+"/approve", map[string]any{"reason": "panne vérifiée"}, bob)
	require.Equal(t, http.StatusOK, ok.Code, ok.Body.String())
	calls := h.wf.callsOf("Refund")
	require.Len(t, calls, 1)
	require.Equal(t, workflows.Refund{ActionID: id, Agent: agentName, AmountCents: 500_00, Reason: "geste commercial après panne"}, calls[0].Arg)
	var row struct {
		Outcome    string `db:"outcome"`
		ReviewedBy string `db:"reviewed_by"`
		Money      int64  `db:"money_cents"`
	}
	require.NoError(t, h.db.Get(&row, `SELECT outcome, reviewed_by, money_cents FROM support_actions WHERE id = $1`, id))
	require.Equal(t, "done", row.Outcome)
	require.Equal(t, bobName, row.ReviewedBy)
	require.Equal(t, int64(500_00), row.Money)

	again := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(id, 10)+"/approve", map[string]any{"reason": "encore"}, bob)
	require.Equal(t, http.StatusConflict, again.Code, again.Body.String())
	require.Len(t, h.wf.callsOf("Refund"), 1)

	small := h.do("POST", "/v1/support/orders/"+ref+"/refund", map[string]any{"reason": "petit geste", "amount_cents": 100_00}, agent)
	require.Equal(t, http.StatusOK, small.Code, small.Body.String())
	require.Len(t, h.wf.callsOf("Refund"), 2)

	// An attribution of "all that is due" counts as the order's total.
	var total int64
	require.NoError(t, h.db.Get(&total, `SELECT total_cents FROM orders WHERE ref = $1`, ref))
	all := h.do("POST", "/v1/support/orders/"+ref+"/attribute-payment", map[string]any{"reason": "virement vérifié"}, agent)
	require.Equal(t, total > 100_00, all.Code == http.StatusAccepted, all.Body.String())
	require.Equal(t, float64(total), all.obj("action")["money_cents"])
}

// A second agent's refusal closes the action (declined) and nothing runs;
// it cannot then be approved.
func TestMoneyActionDeclinedRunsNothing(t *testing.T) {
	h := newFourEyesHarness(t, domain.SupportLimits{FourEyesCents: 100_00, AgentDailyCapCents: 10_000_00})
	ref := h.order(h.register("declined@example.com"))
	r := h.do("POST", "/v1/support/orders/"+ref+"/refund", map[string]any{"reason": "demande du client", "amount_cents": 900_00}, agent)
	require.Equal(t, http.StatusAccepted, r.Code, r.Body.String())
	id := actionID(r)

	no := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(id, 10)+"/decline", map[string]any{"reason": "aucune panne au journal"}, bob)
	require.Equal(t, http.StatusOK, no.Code, no.Body.String())
	require.Equal(t, domain.OutcomeDeclined, no.obj("action")["outcome"])
	yes := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(id, 10)+"/approve", map[string]any{"reason": "finalement oui"}, bob)
	require.Equal(t, http.StatusConflict, yes.Code, yes.Body.String())
	require.Empty(t, h.wf.callsOf("Refund"))
	list := h.do("GET", "/v1/support/actions/awaiting-approval", nil, bob)
	require.Empty(t, list.body["actions"])
}

// An agent's money actions of 24 hours never pass the cap, even sent at
// once: of ten 150 USD refunds under a 500 USD cap, three pass and the
// others are refused (agent_daily_cap) with nothing recorded; what the
// agent approves counts toward their own cap too.
func TestAgentDailyCapHoldsUnderConcurrentActions(t *testing.T) {
	h := newFourEyesHarness(t, domain.SupportLimits{FourEyesCents: 200_00, AgentDailyCapCents: 500_00})
	ref := h.order(h.register("cap@example.com"))
	codes := make([]int, 10)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.do("POST", "/v1/support/orders/"+ref+"/refund", map[string]any{"reason": "gestes commerciaux", "amount_cents": 150_00}, agent)
			codes[i] = r.Code
		}()
	}
	wg.Wait()
	counts := map[int]int{}
	for _, c := range codes {
		counts[c]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 3, http.StatusConflict: 7}, counts)
	require.Len(t, h.wf.callsOf("Refund"), 3)
	require.Equal(t, 3, h.count("support_actions"))

	// Bob asks 300 USD (above 200: alice must approve); alice, at 450 USD,
	// cannot approve it.
	r := h.do("POST", "/v1/support/orders/"+ref+"/refund", map[string]any{"reason": "geste commercial", "amount_cents": 300_00}, bob)
	require.Equal(t, http.StatusAccepted, r.Code, r.Body.String())
	over := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(actionID(r), 10)+"/approve", map[string]any{"reason": "je valide"}, agent)
	require.Equal(t, http.StatusConflict, over.Code, over.Body.String())
	require.Equal(t, domain.ECodeAgentDailyCap, over.errCode())
	require.Len(t, h.wf.callsOf("Refund"), 3)
}

// A value of another asset that no observed rate bounds waits for a
// second agent whatever its amount, and is stated once approved.
func TestValueWithoutRateWaitsForASecondAgent(t *testing.T) {
	h := newFourEyesHarness(t, domain.SupportLimits{FourEyesCents: 100_00, AgentDailyCapCents: 10_000_00})
	ctx := context.Background()
	ref := h.order(h.register("norate@example.com"))
	require.NoError(t, h.db.RecordOrderEvent(ctx, domain.OrderEvent{OrderRef: ref, Key: "other-asset-norate", Kind: domain.EventPaymentToSupport,
		Message: "USDT reçu à l'adresse d'une demande en ETH : transmis au support.", At: time.Now(),
		Exceptions: []domain.NewException{{Reason: domain.ExceptionOtherAsset, PaymentKey: "ethereum:noratetx:0", Network: "ethereum",
			TxID: "noratetx", Asset: "USDT", AmountBase: "5000000"}}}))
	var id string
	require.NoError(t, h.db.Get(&id, `SELECT id::text FROM payment_exceptions WHERE needs_value`))

	r := h.do("POST", "/v1/support/exceptions/"+id+"/value", map[string]any{"reason": "5 USDT au cours de 1 USD", "amount_cents": 500}, agent)
	require.Equal(t, http.StatusAccepted, r.Code, r.Body.String())
	require.Equal(t, domain.ECodeAwaitingApproval, r.errCode())
	var needs bool
	require.NoError(t, h.db.Get(&needs, `SELECT needs_value FROM payment_exceptions WHERE id = $1::bigint`, id))
	require.True(t, needs, "not valued before approval")

	ok := h.do("POST", "/v1/support/actions/"+strconv.FormatInt(actionID(r), 10)+"/approve", map[string]any{"reason": "cours vérifié"}, bob)
	require.Equal(t, http.StatusOK, ok.Code, ok.Body.String())
	require.NoError(t, h.db.Get(&needs, `SELECT needs_value FROM payment_exceptions WHERE id = $1::bigint`, id))
	require.False(t, needs)
}
