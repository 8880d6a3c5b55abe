// Package apptest runs the whole application for integration tests (the
// chain watchers', the site's browser tests, the end-to-end payment tests):
// a real Temporal dev server, and the application as package app assembles
// it for production (worker, activities, API, watchers) with the local
// provisioning driver, a fresh PostgreSQL database, and a payments service
// with fixed rates, so a test pays a real order on a real local chain and
// follows it through its RentalWorkflow. It holds no capacity before
// payment requests (app.Config.Holds), so tests order as many machines as
// they like.
package apptest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/devserver/devservertest"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/localpg"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/rates"
	"github.com/kernodeck/kernodeck/secrets"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// DefaultRates are the fixed USD rates of the harness (USD per whole unit).
var DefaultRates = map[string]string{
	"BTC": "50000", "LTC": "100", "ETH": "2500", "USDT": "1", "USDC": "1", "TRX": "0.25", "SOL": "150",
}

// Options configure the harness.
type Options struct {
	// Networks enabled in the payments service (see payments.Network).
	Networks map[string]payments.Network
	// Rates override DefaultRates.
	Rates map[string]string
	// Deadline and WatchAfter of payment requests (1h and 24h by default).
	Deadline   time.Duration
	WatchAfter time.Duration
	// Holds, when set, holds capacity for orders as the worker does
	// (app.Config.Holds); nil: no holds.
	Holds *app.Holds
	// Payouts, when set, has the API offer payouts (app.Config.PayoutChain);
	// nil: none.
	Payouts *Payouts
}

// Env is a running harness.
type Env struct {
	T         testing.TB
	DB        *postgres.DB
	Temporal  client.Client
	Workflows *wfclient.Client
	Payments  *payments.Service
	Logger    *slog.Logger
	Ctx       context.Context
	// App is the assembled application the harness runs.
	App *app.App
	// Keyring seals the access secrets the worker writes; the API opens
	// them for the owner with it.
	Keyring *secrets.Keyring
}

// staticRates is the harness's rate source: fixed rates, always fresh.
type staticRates map[string]decimal.Decimal

func (s staticRates) Rate(_ context.Context, asset string) (rates.Rate, error) {
	r, ok := s[asset]
	if !ok {
		return rates.Rate{}, rates.ErrUnknownAsset
	}
	return rates.Rate{Asset: asset, USDPerUnit: r, Source: "watchtest-fixed", At: time.Now()}, nil
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// New starts everything; all of it stops when the test ends.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	addr := devservertest.Start(t)
	db := pgtest.NewDB(t)
	kr := testKeyring(t)
	tc, err := client.Dial(app.ClientOptions(client.Options{HostPort: addr}, kr, nil, logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)

	fixed := staticRates{}
	for k, v := range DefaultRates {
		fixed[k] = decimal.RequireFromString(v)
	}
	for k, v := range o.Rates {
		fixed[k] = decimal.RequireFromString(v)
	}
	pay := &payments.Service{
		Store: db, Rates: fixed, Networks: o.Networks,
		Deadline: o.Deadline, WatchAfter: o.WatchAfter,
	}
	cfg := app.Config{
		DB: db, Temporal: tc, Keyring: kr, Payments: pay,
		Provisioner:     &localpg.Provisioner{Store: postgres.LocalGPUs{DB: db}, Host: "gpu-watchtest.local", Port: 22, Keyring: kr},
		ProvisionerName: postgres.ProvisionerLocal,
		Holds:           o.Holds,
		// The operators' host inventory is the SSH driver's on this database
		// (no SSH key: a repair that must log in to a host fails).
		Hosts:  sshhost.NewOperations(postgres.Hosts{DB: db}, &sshhost.Driver{Store: postgres.Hosts{DB: db}, Logger: logger}),
		Logger: logger,
	}
	if o.Payouts != nil {
		cfg.PayoutChain, cfg.PayoutLimits = o.Payouts.shop(db), o.Payouts.Limits
	}
	a := app.New(cfg)
	w := a.Worker()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &Env{T: t, DB: db, Temporal: tc, Workflows: a.Workflows, Payments: pay, Logger: logger, Ctx: ctx, Keyring: kr, App: a}
}

// NewAccount inserts a customer account.
func (e *Env) NewAccount(email string) int64 {
	e.T.Helper()
	a, err := e.DB.CreateAccount(e.Ctx, domain.Account{FirstName: "Test", LastName: "Payer", Email: email}, "not-a-real-hash")
	if err != nil {
		e.T.Fatal(err)
	}
	return a.ID
}

// NewOrder stores an order for 1 lot of rtx-a5000 for 3 days (23.57 USD)
// unless lots say otherwise, and starts its RentalWorkflow.
func (e *Env) NewOrder(accountID int64, lots int) domain.Order {
	e.T.Helper()
	item, err := e.DB.CatalogItem(e.Ctx, "rtx-a5000")
	if err != nil {
		e.T.Fatal(err)
	}
	q, err := domain.PriceQuote(item, domain.Configuration{Model: "rtx-a5000", Lots: lots, DurationDays: 3, Preset: "python"})
	if err != nil {
		e.T.Fatal(err)
	}
	o, err := e.DB.CreateOrder(e.Ctx, accountID, q)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := e.Workflows.StartRental(e.Ctx, workflows.NewRentalInput(o, workflows.RentalConfig{
		UnpaidTimeout: 24 * time.Hour, ProvisioningAttempts: 3,
	})); err != nil {
		e.T.Fatal(err)
	}
	return o
}

// NewTopUp stores a top-up and starts its TopUpWorkflow.
func (e *Env) NewTopUp(accountID, cents int64) domain.TopUp {
	e.T.Helper()
	tu, err := e.DB.CreateTopUp(e.Ctx, accountID, cents)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := e.Workflows.StartTopUp(e.Ctx, workflows.NewTopUpInput(tu, 24*time.Hour)); err != nil {
		e.T.Fatal(err)
	}
	return tu
}

// RequestOrderPayment runs the real create-payment-intent update.
func (e *Env) RequestOrderPayment(orderRef, asset, network string) (domain.Intent, error) {
	return e.Workflows.CreateOrderIntent(e.Ctx, orderRef, workflows.IntentRequest{Asset: asset, Network: network})
}

// RequestTopUpPayment runs create-payment-intent on a top-up.
func (e *Env) RequestTopUpPayment(topUpRef, asset, network string) (domain.Intent, error) {
	return e.Workflows.CreateTopUpIntent(e.Ctx, topUpRef, workflows.IntentRequest{Asset: asset, Network: network})
}

// Watcher builds a watcher for chain as the application does, polling
// every 100 ms.
func (e *Env) Watcher(chain chainwatch.Chain, confirmations int64) *chainwatch.Watcher {
	return e.WatcherWith(chain, app.WatcherOptions{Confirmations: confirmations})
}

// WatcherWith is Watcher with o's confirmations, mempool and broadcaster
// (its lease holder, poll and backfill are the harness's).
func (e *Env) WatcherWith(chain chainwatch.Chain, o app.WatcherOptions) *chainwatch.Watcher {
	o.Holder, o.Poll, o.Backfill = "watchtest", 100*time.Millisecond, 10
	return e.App.Watcher(chain, o)
}

// Order reads an order.
func (e *Env) Order(ref string) domain.Order {
	e.T.Helper()
	o, err := e.DB.GetOrder(e.Ctx, ref)
	if err != nil {
		e.T.Fatal(err)
	}
	return o
}

// WaitOrderStatus polls until the order has status (60 s at most).
func (e *Env) WaitOrderStatus(ref, status string) domain.Order {
	e.T.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		o := e.Order(ref)
		if o.Status == status {
			return o
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("order %s is %s, want %s; timeline: %v", ref, o.Status, status, e.Kinds(ref))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Timeline reads a target's timeline.
func (e *Env) Timeline(ref string) []domain.TimelineEvent {
	e.T.Helper()
	tl, err := e.DB.Timeline(e.Ctx, ref, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	return tl
}

// Kinds lists the kinds of a target's timeline events.
func (e *Env) Kinds(ref string) []string {
	var ks []string
	for _, ev := range e.Timeline(ref) {
		ks = append(ks, ev.Kind)
	}
	return ks
}

// ChainPayment is a chain_payments row.
type ChainPayment struct {
	Network       string  `db:"network"`
	TxID          string  `db:"txid"`
	Index         int64   `db:"output_index"`
	Asset         string  `db:"asset"`
	IntentID      string  `db:"intent_id"`
	AmountBase    string  `db:"amount_base"`
	AmountCents   int64   `db:"amount_cents"`
	Late          bool    `db:"late"`
	State         string  `db:"state"`
	SignaledState *string `db:"signaled_state"`
	// ToSupport is why a payment could not be counted (nil if it could).
	ToSupport         *string `db:"to_support"`
	Dust              bool    `db:"dust"`
	AfterConfirmation bool    `db:"after_confirmation"`
	Mempool           bool    `db:"mempool"`
	Reversals         int     `db:"reversals"`
}

// ChainPayments lists the payments recorded for an intent.
func (e *Env) ChainPayments(intentID string) []ChainPayment {
	e.T.Helper()
	var out []ChainPayment
	if err := e.DB.SelectContext(e.Ctx, &out, `SELECT network, txid, output_index, asset, intent_id,
		amount_base::text AS amount_base, amount_cents, late, state, signaled_state, to_support, dust,
		after_confirmation, mempool, reversals
		FROM chain_payments WHERE intent_id = $1 ORDER BY seen_at, txid, output_index`, intentID); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// WaitFor polls cond until it holds (60 s at most).
func (e *Env) WaitFor(what string, cond func() bool) {
	e.T.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.T.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
