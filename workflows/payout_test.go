package workflows_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/workflows"
)

// signedPayoutBatch makes, on db, a customer with a 100 USD balance, a
// 50 USD LTC payout approved and batched, and the batch signed with txid.
func signedPayoutBatch(t *testing.T, db *postgres.DB, txid string) (accountID int64, payoutRef, batchRef string, q domain.PayoutQuote) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, db.Get(&accountID, `INSERT INTO accounts (first_name, last_name, email, password_hash)
		VALUES ('Ada', 'Lovelace', 'payout@example.com', 'x') RETURNING id`))
	top := domain.NewRef(domain.TopUpRefPrefix)
	_, err := db.Exec(`INSERT INTO topups (ref, account_id, amount_cents, status, workflow_id)
		VALUES ($1, $2, 10000, 'awaiting_payment', 'topup-' || $1)`, top, accountID)
	require.NoError(t, err)
	require.NoError(t, db.CreditTopUp(ctx, activities.CreditTopUpInput{TopUpRef: top, AccountID: accountID, AmountCents: 100_00}))
	q = domain.PayoutQuote{
		PayoutAsk: domain.PayoutAsk{Asset: "LTC", Network: domain.NetworkLitecoin,
			Address: "rltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", AmountCents: 50_00},
		FeeCents: 10, Decimals: 8, AmountBase: domain.NewBigInt(big.NewInt(49_900_000)), Rate: "100", RateAt: time.Now(),
	}
	p, err := db.RequestPayout(ctx, domain.NewPayout{AccountID: accountID, Quote: q, RequestKey: "wf", Daily: 1_000_00})
	require.NoError(t, err)
	_, err = db.ApprovePayout(ctx, p.Ref, "alice", false)
	require.NoError(t, err)
	b, _, err := db.OpenBatch(ctx, domain.NetworkLitecoin, "LTC", "alice")
	require.NoError(t, err)
	require.NoError(t, db.SignBatch(ctx, b.Ref, txid, "00", "alice", func(domain.Payout, *domain.Intent) error { return nil }))
	return accountID, p.Ref, b.Ref, q
}

// The batch workflow, with the real activities on PostgreSQL, applies the
// watchers' news in order: seen, confirmed (done, debited), reverted by a
// reorganisation (waiting again), confirmed again (no second debit); it
// ends PayoutSettle after the last payout is done, and what the chain does
// after that is applied by the watchers' store.
func TestPayoutWorkflowFollowsTheChainAndDebitsOnce(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	const txid = "dd00000000000000000000000000000000000000000000000000000000000004"
	acc, payoutRef, batchRef, q := signedPayoutBatch(t, db, txid)
	require.NoError(t, db.RecordBlock(ctx, domain.NetworkLitecoin, "", 7, "h7", []domain.ChainSeen{{
		TxID: txid, Asset: "LTC", Address: q.Address, Amount: &q.AmountBase.Int, BlockHeight: 7, BlockHash: "h7", BlockTime: time.Now()}}))
	pend, err := db.Unsignaled(ctx, domain.NetworkLitecoin, nil, 10)
	require.NoError(t, err)
	require.Len(t, pend, 1)

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.PayoutWorkflow, workflow.RegisterOptions{Name: workflows.PayoutWorkflowType})
	env.RegisterActivity(&activities.Activities{Store: db, Payouts: db})
	status := func() domain.PayoutStatus {
		p, _, err := db.Payout(ctx, acc, payoutRef)
		require.NoError(t, err)
		return p.Status
	}
	var seenAt []domain.PayoutStatus
	signal := func(at time.Duration, name, state string) {
		env.RegisterDelayedCallback(func() {
			p := pend[0]
			p.State = state
			env.SignalWorkflow(name, chainwatch.PaymentEvent(p))
		}, at)
		env.RegisterDelayedCallback(func() { seenAt = append(seenAt, status()) }, at+time.Second)
	}
	signal(time.Minute, workflows.SignalPaymentSeen, domain.PaymentStateSeen)
	signal(2*time.Minute, workflows.SignalPaymentConfirmed, domain.PaymentStateConfirmed)
	signal(3*time.Minute, workflows.SignalPaymentReverted, domain.PaymentStateReverted)
	signal(4*time.Minute, workflows.SignalPaymentConfirmed, domain.PaymentStateConfirmed)
	env.ExecuteWorkflow(workflows.PayoutWorkflow, workflows.PayoutInput{BatchRef: batchRef})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []domain.PayoutStatus{domain.PayoutSeen, domain.PayoutDone, domain.PayoutSigned, domain.PayoutDone}, seenAt)

	var sent int64
	require.NoError(t, db.Get(&sent, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = 'payouts_sent'`))
	require.EqualValues(t, 50_00, sent, "debited once")
	b, _, err := db.Batch(ctx, batchRef)
	require.NoError(t, err)
	require.Equal(t, domain.BatchDone, b.Status)

	// The workflow has ended: a later reorganisation reaches the payout
	// through the watchers' store.
	late := pend[0]
	late.State, late.AfterConfirmation = domain.PaymentStateReverted, true
	require.NoError(t, db.MarkUndeliverable(ctx, late))
	require.Equal(t, domain.PayoutSigned, status())
}
