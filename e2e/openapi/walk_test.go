// Package openapi checks api/openapi.yaml by what a stranger would do with
// it: generate a Go client with oapi-codegen (pinned in
// scripts/ensure-tools.sh) and rent a machine with that client alone.
// client_gen_test.go is the generator's output, kept current by
// TestGeneratedClientIsCurrent.
package openapi

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payments"
)

const confirmations = 2

// The generated client walks register → order → payment request → paid on
// a real Litecoin regtest node → the order with its access, against the
// real application (workflows on a Temporal dev server, PostgreSQL, the
// chain watcher). Only the generated types and calls are used: a field
// the document names wrongly fails to decode or reads empty here.
func TestGeneratedClientRentsAMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs litecoind, the Temporal CLI and PostgreSQL (scripts/ensure-tools.sh)")
	}
	port, err := devnodes.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	node, err := devnodes.StartLitecoinOn(ctx, t.TempDir(), port)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	nodeURL := devnodes.LitecoinURLOn(port)
	acc, err := hdwallet.ParseAccountKey(hdwallet.Network("litecoin-regtest"), devnodes.LitecoinRegtestXpub)
	if err != nil {
		t.Fatal(err)
	}
	env := apptest.New(t, apptest.Options{Networks: map[string]payments.Network{domain.NetworkLitecoin: {Deriver: acc}}})
	chain, err := utxo.New(utxo.Config{Host: fmt.Sprintf("http://127.0.0.1:%d", port),
		User: "kernodeck", Pass: "kernodeck-dev", Network: domain.NetworkLitecoin})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(env.Ctx)
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	w := env.Watcher(chain, confirmations)
	go func() { defer close(done); _ = w.Run(wctx) }()
	srv := env.ServeAPI(api.Config{Confirmations: map[string]int64{domain.NetworkLitecoin: confirmations}}, nil)

	c, err := NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	bearer := true
	reg, err := c.RegisterWithResponse(env.Ctx, RegisterJSONRequestBody{FirstName: "Ada", LastName: "Lovelace",
		Email: "ada@example.com", Password: "correct horse battery staple", Bearer: &bearer})
	if err != nil {
		t.Fatal(err)
	}
	if reg.JSON201 == nil || reg.JSON201.Token == nil {
		t.Fatalf("register: %d %s", reg.StatusCode(), reg.Body)
	}
	me := reg.JSON201.Account
	// The address is confirmed as the mailed link would (unconfirmed
	// accounts take no machine hold).
	if _, err := env.DB.VerifyEmail(env.Ctx, me.Id, me.Email); err != nil {
		t.Fatal(err)
	}
	auth := func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+*reg.JSON201.Token)
		return nil
	}

	created, err := c.CreateOrderWithResponse(env.Ctx, nil, CreateOrderJSONRequestBody{GpuModel: "rtx-a5000", Lots: 1,
		DurationDays: 3, Preset: "python"}, auth)
	if err != nil {
		t.Fatal(err)
	}
	if created.JSON201 == nil {
		t.Fatalf("order: %d %s", created.StatusCode(), created.Body)
	}
	ref := created.JSON201.Order.Reference
	if created.JSON201.Order.Status != "awaiting_payment" && created.JSON201.Order.Status != "created" {
		t.Fatalf("new order %s: status %s", ref, created.JSON201.Order.Status)
	}

	var pr *PaymentIntent
	env.WaitFor("a payment request once the workflow waits for payment", func() bool {
		r, err := c.CreateOrderPaymentIntentWithResponse(env.Ctx, ref, nil,
			CreateOrderPaymentIntentJSONRequestBody{Asset: "LTC", Network: "litecoin"}, auth)
		if err != nil {
			t.Fatal(err)
		}
		if r.JSON201 != nil {
			pr = &r.JSON201.PaymentIntent
		}
		return pr != nil
	})
	base, ok := new(big.Int).SetString(pr.AmountBaseUnits, 10)
	if !ok || base.Sign() <= 0 || pr.Address == "" || pr.Decimals != 8 || pr.TargetReference != ref {
		t.Fatalf("payment request: %+v", pr)
	}
	var in domain.Intent
	in.Address, in.Network, in.Decimals = pr.Address, pr.Network, int32(pr.Decimals)
	in.AmountBase.Int = *base
	if _, err := devnodes.PayLitecoin(env.Ctx, nodeURL, in, confirmations); err != nil {
		t.Fatal(err)
	}

	var got *OrderDetail
	env.WaitFor("the order active with its access", func() bool {
		r, err := c.GetOrderWithResponse(env.Ctx, ref, auth)
		if err != nil {
			t.Fatal(err)
		}
		if r.JSON200 == nil {
			t.Fatalf("get order: %d %s", r.StatusCode(), r.Body)
		}
		got = r.JSON200
		return got.Order.Status == "active" && got.Access != nil
	})
	if got.Access.Host == "" || got.Access.Port == 0 || got.Access.Username == "" {
		t.Fatalf("access: %+v", got.Access)
	}
	if got.PaymentIntents == nil || len(*got.PaymentIntents) != 1 || (*got.PaymentIntents)[0].Id != pr.Id {
		t.Fatalf("payment requests on the order: %+v", got.PaymentIntents)
	}
}
