package postgres_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// fundedAccount is an account with cents on its balance: credited top-ups
// of 100 USD (the top-ups' smallest amount).
func fundedAccount(t *testing.T, db *postgres.DB, email string, cents int64) int64 {
	t.Helper()
	acc := seedAccount(t, db, email)
	for ; cents > 0; cents -= 100_00 {
		top := seedTopUp(t, db, acc, 100_00)
		require.NoError(t, db.CreditTopUp(context.Background(), activities.CreditTopUpInput{TopUpRef: top, AccountID: acc, AmountCents: 100_00}))
	}
	return acc
}

func ltcQuote(address string, cents int64) domain.PayoutQuote {
	return domain.PayoutQuote{
		PayoutAsk: domain.PayoutAsk{Asset: "LTC", Network: domain.NetworkLitecoin, Address: address, AmountCents: cents},
		FeeCents:  10, Decimals: 8, AmountBase: domain.NewBigInt(big.NewInt(cents * 1000)), Rate: "100", RateAt: time.Now(),
	}
}

func available(t *testing.T, db *postgres.DB, acc int64) int64 {
	t.Helper()
	b, err := db.Balance(context.Background(), acc)
	require.NoError(t, err)
	return b.AvailableCents
}

func ledgerOf(t *testing.T, db *postgres.DB, account string) int64 {
	t.Helper()
	var s int64
	require.NoError(t, db.Get(&s, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE ledger_account = $1`, account))
	return s
}

// A payout holds its amount at once, once per request key; a payout the
// balance or the daily limit does not cover is refused and changes
// nothing; cancelled, its amount is back.
func TestPayoutHoldLimitsAndCancel(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := fundedAccount(t, db, "po@example.com", 500_00)
	const addr = "rltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"

	in := domain.NewPayout{AccountID: acc, Quote: ltcQuote(addr, 100_00), RequestKey: "k1", Daily: 250_00}
	p, err := db.RequestPayout(ctx, in)
	require.NoError(t, err)
	require.Equal(t, domain.PayoutRequested, p.Status)
	again, err := db.RequestPayout(ctx, in) // a retried request
	require.NoError(t, err)
	require.Equal(t, p.Ref, again.Ref)
	require.EqualValues(t, 400_00, available(t, db, acc))
	require.EqualValues(t, 100_00, ledgerOf(t, db, "payouts_held"))

	_, err = db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: ltcQuote(addr, 200_00), RequestKey: "k2", Daily: 250_00})
	require.Equal(t, domain.ECodePayoutLimit, domain.ErrorCode(err), "over the daily limit: %v", err)
	_, err = db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: ltcQuote(addr, 450_00), RequestKey: "k3", Daily: 10_000_00})
	require.Equal(t, domain.ECodeInsufficient, domain.ErrorCode(err), "over the balance: %v", err)
	require.EqualValues(t, 400_00, available(t, db, acc), "a refusal changes nothing")

	other := fundedAccount(t, db, "other@example.com", 100_00)
	_, _, err = db.CancelPayout(ctx, other, p.Ref)
	require.Equal(t, domain.ECodeNotFound, domain.ErrorCode(err), "another customer's payout: %v", err)

	c, voided, err := db.CancelPayout(ctx, acc, p.Ref)
	require.NoError(t, err)
	require.Empty(t, voided)
	require.Equal(t, domain.PayoutCancelled, c.Status)
	require.EqualValues(t, 500_00, available(t, db, acc))
	_, _, err = db.CancelPayout(ctx, acc, p.Ref)
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err))
	require.EqualValues(t, 500_00, available(t, db, acc), "cancelled once")
	require.Zero(t, ledgerSum(t, db))
}

// Above the four-eyes threshold a payout takes two different agents, the
// second a senior; a batch gathers the approved ones; a customer's cancel
// voids the unsigned batch and the others wait for the next.
func TestPayoutApprovalAndBatchVoid(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := fundedAccount(t, db, "po2@example.com", 1_000_00)
	const addr = "rltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"
	big1, err := db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: ltcQuote(addr, 300_00), RequestKey: "a", NeedsTwo: true, Daily: 10_000_00})
	require.NoError(t, err)
	small, err := db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: ltcQuote(addr, 20_00), RequestKey: "b", Daily: 10_000_00})
	require.NoError(t, err)

	p, err := db.ApprovePayout(ctx, big1.Ref, "alice", false)
	require.NoError(t, err)
	require.Equal(t, domain.PayoutRequested, p.Status, "one approval is not enough")
	_, err = db.ApprovePayout(ctx, big1.Ref, "alice", true)
	require.Equal(t, domain.ECodeOwnAction, domain.ErrorCode(err))
	_, err = db.ApprovePayout(ctx, big1.Ref, "bob", false)
	require.Equal(t, domain.ECodeForbidden, domain.ErrorCode(err), "the second approval is a senior's")
	p, err = db.ApprovePayout(ctx, big1.Ref, "carol", true)
	require.NoError(t, err)
	require.Equal(t, domain.PayoutApproved, p.Status)
	p, err = db.ApprovePayout(ctx, small.Ref, "bob", false)
	require.NoError(t, err)
	require.Equal(t, domain.PayoutApproved, p.Status)

	b, ps, err := db.OpenBatch(ctx, domain.NetworkLitecoin, "LTC", "carol")
	require.NoError(t, err)
	require.Len(t, ps, 2)
	b2, _, err := db.OpenBatch(ctx, domain.NetworkLitecoin, "LTC", "carol")
	require.NoError(t, err)
	require.Equal(t, b.Ref, b2.Ref, "a retried call makes no second batch")

	_, voided, err := db.CancelPayout(ctx, acc, small.Ref)
	require.NoError(t, err)
	require.Equal(t, b.Ref, voided)
	got, _, err := db.Payout(ctx, acc, big1.Ref)
	require.NoError(t, err)
	require.Equal(t, domain.PayoutApproved, got.Status, "back in line for the next batch")
	require.Nil(t, got.BatchRef)
	err = db.SignBatch(ctx, b.Ref, "", "", "carol", func(domain.Payout, *domain.Intent) error { return nil })
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err), "a voided batch is not signed")
	require.EqualValues(t, 700_00, available(t, db, acc))
}

// Signed, a payout is watched at the customer's address: only a transfer
// of exactly its amount (in its transaction) counts; confirmed, it is
// debited once; a reorganisation puts it back to waiting, and its second
// confirmation debits nothing more.
func TestPayoutWatchedDebitedOnceThroughReorg(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := fundedAccount(t, db, "po3@example.com", 100_00)
	const addr = "rltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"
	q := ltcQuote(addr, 50_00)
	p, err := db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: q, RequestKey: "w", Daily: 10_000_00})
	require.NoError(t, err)
	_, err = db.ApprovePayout(ctx, p.Ref, "alice", false)
	require.NoError(t, err)
	b, _, err := db.OpenBatch(ctx, domain.NetworkLitecoin, "LTC", "alice")
	require.NoError(t, err)
	const txid = "aa00000000000000000000000000000000000000000000000000000000000001"
	require.NoError(t, db.SignBatch(ctx, b.Ref, txid, "00", "alice", func(domain.Payout, *domain.Intent) error { return nil }))

	known, err := db.KnownAddresses(ctx, domain.NetworkLitecoin, 0)
	require.NoError(t, err)
	require.Contains(t, known, domain.KnownAddress{Seq: known[len(known)-1].Seq, Address: addr}, "the watchers learn the address")

	seen := func(tx string, amount int64) domain.ChainSeen {
		return domain.ChainSeen{TxID: tx, Index: 0, Asset: "LTC", Address: addr, Amount: big.NewInt(amount),
			BlockHeight: 10, BlockHash: "h10", BlockTime: time.Now()}
	}
	want := q.AmountBase.Int64()
	require.NoError(t, db.RecordBlock(ctx, domain.NetworkLitecoin, "", 10, "h10", []domain.ChainSeen{
		seen("bb00000000000000000000000000000000000000000000000000000000000002", want),   // another transaction
		seen("cc00000000000000000000000000000000000000000000000000000000000003", want+1), // another amount
		seen(txid, want),
	}))
	var stored []string
	require.NoError(t, db.Select(&stored, `SELECT txid FROM chain_payments WHERE network = 'litecoin'`))
	require.Equal(t, []string{txid}, stored, "the customer's other transfers are not kept")

	pend, err := db.Unsignaled(ctx, domain.NetworkLitecoin, nil, 10)
	require.NoError(t, err)
	require.Len(t, pend, 1)
	require.Equal(t, domain.TargetPayout, pend[0].TargetKind)
	require.Equal(t, b.Ref, pend[0].TargetRef)

	step := func(state string, want domain.PayoutStatus) bool {
		done, err := db.PayoutChainState(ctx, pend[0].IntentID, state, txid)
		require.NoError(t, err)
		got, _, err := db.Payout(ctx, acc, p.Ref)
		require.NoError(t, err)
		require.Equal(t, want, got.Status, "after %s", state)
		return done
	}
	require.False(t, step(domain.PaymentStateSeen, domain.PayoutSeen))
	require.True(t, step(domain.PaymentStateConfirmed, domain.PayoutDone))
	require.EqualValues(t, 50_00, ledgerOf(t, db, "payouts_sent"))
	require.False(t, step(domain.PaymentStateReverted, domain.PayoutSigned))
	require.True(t, step(domain.PaymentStateConfirmed, domain.PayoutDone))
	require.True(t, step(domain.PaymentStateConfirmed, domain.PayoutDone), "a repeated signal changes nothing")
	require.EqualValues(t, 50_00, ledgerOf(t, db, "payouts_sent"), "debited once")
	var mails []string
	require.NoError(t, db.Select(&mails, `SELECT template FROM mail_outbox WHERE ref = $1 ORDER BY id`, p.Ref))
	require.Equal(t, []string{postgres.MailPayoutRequested, postgres.MailPayoutDone}, mails, "asked and done, each mailed once")
	require.Zero(t, ledgerOf(t, db, "payouts_held"))
	require.EqualValues(t, 50_00, available(t, db, acc))
	require.Zero(t, ledgerSum(t, db))
}

// A batch that cannot be exported is given up: its payouts are approved
// again, and the next batch takes them with a change index never used.
func TestPayoutBatchVoidedWhenNotExported(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := fundedAccount(t, db, "po4@example.com", 100_00)
	p, err := db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: ltcQuote("rltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", 20_00),
		RequestKey: "v", Daily: 1_000_00})
	require.NoError(t, err)
	_, err = db.ApprovePayout(ctx, p.Ref, "alice", false)
	require.NoError(t, err)
	b1, _, err := db.OpenBatch(ctx, domain.NetworkLitecoin, "LTC", "carol")
	require.NoError(t, err)
	require.NoError(t, db.VoidOpenBatch(ctx, b1.Ref))
	got, _, err := db.Payout(ctx, acc, p.Ref)
	require.NoError(t, err)
	require.Equal(t, domain.PayoutApproved, got.Status)
	b2, ps, err := db.OpenBatch(ctx, domain.NetworkLitecoin, "LTC", "carol")
	require.NoError(t, err)
	require.NotEqual(t, b1.Ref, b2.Ref)
	require.Len(t, ps, 1)
	require.Greater(t, *b2.ChangeIndex, *b1.ChangeIndex)
}

// A transfer list's payout learns its transaction from the chain; taken out
// by a reorganisation, it forgets it, and another transfer of its amount
// (the operator sending anew) pays it.
func TestPayoutTransferListLearnsItsTransaction(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	acc := fundedAccount(t, db, "po5@example.com", 100_00)
	const addr = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	q := domain.PayoutQuote{
		PayoutAsk: domain.PayoutAsk{Asset: "ETH", Network: domain.NetworkEthereum, Address: addr, AmountCents: 30_00},
		FeeCents:  2_00, Decimals: 18, AmountBase: domain.NewBigInt(big.NewInt(11_200_000_000_000_000)), Rate: "2500", RateAt: time.Now(),
	}
	p, err := db.RequestPayout(ctx, domain.NewPayout{AccountID: acc, Quote: q, RequestKey: "t", Daily: 1_000_00})
	require.NoError(t, err)
	_, err = db.ApprovePayout(ctx, p.Ref, "alice", false)
	require.NoError(t, err)
	b, _, err := db.OpenBatch(ctx, domain.NetworkEthereum, "ETH", "alice")
	require.NoError(t, err)
	require.NoError(t, db.SignBatch(ctx, b.Ref, "", "", "alice", func(domain.Payout, *domain.Intent) error { return nil }))

	transfer := func(tx, hash string) {
		require.NoError(t, db.RecordBlock(ctx, domain.NetworkEthereum, "", 10, hash, []domain.ChainSeen{{
			TxID: tx, Asset: "ETH", Address: strings.ToLower(addr), Amount: &q.AmountBase.Int,
			BlockHeight: 10, BlockHash: hash, BlockTime: time.Now()}}))
	}
	// signal hands what the chain showed to the payout, as the watcher does.
	signal := func() domain.Payout {
		pend, err := db.Unsignaled(ctx, domain.NetworkEthereum, nil, 10)
		require.NoError(t, err)
		require.NotEmpty(t, pend)
		for _, c := range pend {
			_, err = db.PayoutChainState(ctx, c.IntentID, c.State, c.TxID)
			require.NoError(t, err)
			require.NoError(t, db.MarkSignaled(ctx, c))
		}
		got, _, err := db.Payout(ctx, acc, p.Ref)
		require.NoError(t, err)
		return got
	}
	const first, second = "0xaa01", "0xbb02"
	transfer(first, "h10a")
	got := signal()
	require.Equal(t, domain.PayoutSeen, got.Status)
	require.NotNil(t, got.TxID)
	require.Equal(t, first, *got.TxID, "learnt from the chain")

	_, err = db.Rewind(ctx, domain.NetworkEthereum, "", 9)
	require.NoError(t, err)
	got = signal()
	require.Equal(t, domain.PayoutSigned, got.Status)
	require.Nil(t, got.TxID, "forgotten with its block")

	transfer(second, "h10b")
	_, err = db.Confirm(ctx, domain.NetworkEthereum, "", 10)
	require.NoError(t, err)
	got = signal()
	require.Equal(t, domain.PayoutDone, got.Status)
	require.Equal(t, second, *got.TxID)
	require.EqualValues(t, 30_00, ledgerOf(t, db, "payouts_sent"))
}
