package activities

import (
	"context"
	"errors"
)

// PayoutChain applies what the chain watchers saw of a payout's transfer
// (implemented by package postgres).
type PayoutChain interface {
	PayoutChainState(ctx context.Context, intentID, state, txid string) (batchDone bool, err error)
}

// PayoutChainInput is one watcher's signal about one payout's transfer.
type PayoutChainInput struct {
	IntentID string // the payout's watch
	State    string // domain.PaymentState*
	TxID     string
}

// PayoutChainState applies in to its payout (seen, done and debited once,
// or waiting again after a reorganisation) and reports whether every payout
// of the batch is done.
func (a *Activities) PayoutChainState(ctx context.Context, in PayoutChainInput) (bool, error) {
	if a.Payouts == nil {
		return false, errors.New("payouts: no store wired")
	}
	return a.Payouts.PayoutChainState(ctx, in.IntentID, in.State, in.TxID)
}
