package app_test

import (
	"context"
	"testing"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/metrics"
)

// nodeWithMempool is a chain whose node has a mempool.
type nodeWithMempool struct{ chainwatch.Chain }

func (nodeWithMempool) Network() string { return "bitcoin" }
func (nodeWithMempool) TxState(context.Context, string) (chainwatch.TxState, error) {
	return chainwatch.TxPending, nil
}
func (nodeWithMempool) Mempool(context.Context) ([]chainwatch.MempoolTx, error) { return nil, nil }

// A measured watcher's chain is a decorator that hides the node's mempool
// (found by a type assertion, replacement detection and the takeover read
// were silently off wherever metrics were on, in production too): the
// mempool is given to the watcher as such and survives the decoration.
func TestMeasuredWatcherKeepsTheNodesMempool(t *testing.T) {
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	node := nodeWithMempool{}
	w := app.New(app.Config{Metrics: m}).Watcher(node, app.WatcherOptions{Mempool: node})
	if _, ok := w.Chain.(chainwatch.Mempool); ok {
		t.Fatal("the measured chain is expected to be a decorator without the mempool")
	}
	if w.Mempool != chainwatch.Mempool(node) {
		t.Fatalf("watcher's mempool %v, want the node's", w.Mempool)
	}
}
