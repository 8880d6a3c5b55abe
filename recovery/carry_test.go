package recovery

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/workflows"
)

// carried is the carry of in as its JSON form (the workflows' stable one).
func carried(t *testing.T, carry any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(carry)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Each status starts at its waiting point with the state PostgreSQL shows.
func TestRentalInputPerStatus(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(72 * time.Hour)
	it := domain.Intent{ID: "PI-1", TargetKind: "order", TargetRef: "K-1", Asset: "BTC", Network: "bitcoin",
		Address: "bc1qx", Deadline: start.Add(2 * time.Hour), CreatedAt: start}
	rec := postgres.TargetRecord{
		Intents: []domain.Intent{it}, RequestKeys: []string{"intent:2"},
		Payments: []domain.PendingPayment{
			{Network: "bitcoin", TxID: "t1", Index: 0, Asset: "BTC", IntentID: "PI-1", TargetKind: "order", TargetRef: "K-1",
				Address: "bc1qx", AmountBase: "1000", AmountCents: 500, State: "confirmed"},
			{Network: "bitcoin", TxID: "t2", Index: 1, Asset: "BTC", IntentID: "PI-1", TargetKind: "order", TargetRef: "K-1",
				Address: "bc1qx", AmountBase: "1000", AmountCents: 500, State: "seen"},
			// Confirmed on chain, its confirmation not handled: left for the re-sent signal.
			{Network: "bitcoin", TxID: "t3", Index: 0, Asset: "BTC", IntentID: "PI-1", TargetKind: "order", TargetRef: "K-1",
				Address: "bc1qx", AmountBase: "1000", AmountCents: 500, State: "confirmed"},
		},
		EventKeys: []string{"created", "seen:bitcoin:t1:0", "confirmed:bitcoin:t1:0", "seen:bitcoin:t2:1",
			"prov:1:reserve:started", "prov:2:retry", "reminder:123:48h0m0s", "support:77:extend"},
		ExtendedDays: 2,
	}
	method := "crypto"
	cases := []struct {
		status, at string
		check      func(t *testing.T, c map[string]any)
	}{
		{domain.StatusPaymentDetected, atPayment, func(t *testing.T, c map[string]any) {
			l := c["Payments"].(map[string]any)
			if len(l["Counted"].(map[string]any)) != 1 || l["Counted"].(map[string]any)["bitcoin:t1:0"] != true {
				t.Errorf("counted %v, want t1 only", l["Counted"])
			}
			if len(l["Pending"].(map[string]any)) != 1 || l["Pending"].(map[string]any)["bitcoin:t2:1"] != true {
				t.Errorf("pending %v, want t2 only", l["Pending"])
			}
			if c["Intents"].(float64) != 2 {
				t.Errorf("intents %v, want 2 (the highest request key)", c["Intents"])
			}
		}},
		{domain.StatusPaid, atPayment, nil},
		{domain.StatusProvisioning, "provision", func(t *testing.T, c map[string]any) {
			if c["Attempt"].(float64) != 1 || c["Waiting"] == true || c["ProvStarted"] != true {
				t.Errorf("attempt %v waiting %v begun %v, want attempt 2 made again (1 carried), not waiting, begun",
					c["Attempt"], c["Waiting"], c["ProvStarted"])
			}
		}},
		{domain.StatusWaitingForMachine, atMachine, func(t *testing.T, c map[string]any) {
			if c["Waiting"] != true {
				t.Error("not waiting in line")
			}
		}},
		{domain.StatusProvisioningFailed, atProvisioningFailed, nil},
		{domain.StatusActive, atPeriod, func(t *testing.T, c map[string]any) {
			if c["End"] != end.Format(time.RFC3339) || c["EndNow"] == true {
				t.Errorf("end %v (now %v), want %v", c["End"], c["EndNow"], end)
			}
			if r := c["Reminded"].(map[string]any); len(r) != 1 || r["reminder:123:48h0m0s"] != true {
				t.Errorf("reminded %v", r)
			}
		}},
		{domain.StatusEnding, atPeriod, func(t *testing.T, c map[string]any) {
			if c["EndNow"] != true {
				t.Error("an ending rental is not torn down again")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.status, func(t *testing.T) {
			o := domain.Order{Ref: "K-1", AccountID: 1, Model: "rtx-a5000", Lots: 1, GPUsPerLot: 1, TotalGPUs: 1, DurationDays: 3,
				Preset: "python", TotalCents: 1000, PaidCents: 1000, Status: tc.status, PaymentMethod: &method,
				PeriodStart: &start, PeriodEnd: &end, WorkflowStartedAt: &start, CreatedAt: start}
			in, at, ok, err := rentalInput(o, rec, workflows.RentalConfig{UnpaidTimeout: time.Hour})
			if err != nil || !ok || at != tc.at {
				t.Fatalf("at %q ok %v err %v, want %q", at, ok, err, tc.at)
			}
			c := carried(t, in.Carry)
			wantAt := tc.at
			if wantAt == "provision" {
				wantAt = atMachine
			}
			if c["Phase"] != wantAt || c["Status"].(map[string]any)["Status"] != tc.status {
				t.Fatalf("carry at %v in status %v", c["Phase"], c["Status"])
			}
			if a := c["Actions"].(map[string]any); len(a) != 1 || a["77"] != true {
				t.Errorf("support actions applied %v, want 77", a)
			}
			if c["ExtraDays"].(float64) != 2 {
				t.Errorf("extra days %v, want 2", c["ExtraDays"])
			}
			if c["PayUntil"] != it.Deadline.Format(time.RFC3339) {
				t.Errorf("pay until %v, want the request's deadline %v", c["PayUntil"], it.Deadline)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
	for _, final := range []string{domain.StatusEnded, domain.StatusCancelled, domain.StatusExpired, domain.StatusRefunded} {
		if _, _, ok, err := rentalInput(domain.Order{Ref: "K-1", Status: final}, rec, workflows.RentalConfig{}); ok || err != nil {
			t.Errorf("a %s order is recovered (%v)", final, err)
		}
	}
}

// A credited top-up listens until its window ends, then has nothing to run.
func TestTopUpInput(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	credited := now.Add(-30 * time.Minute)
	tu := domain.TopUp{Ref: "T-1", AccountID: 1, AmountCents: 10000, Status: domain.TopUpCredited, CreditedAt: &credited, CreatedAt: now.Add(-time.Hour)}
	in, at, ok, err := topUpInput(tu, postgres.TargetRecord{}, time.Hour, now)
	if err != nil || !ok || at != atCredited || !in.Carry.ListenUntil.Equal(credited.Add(time.Hour)) {
		t.Fatalf("credited top-up: at %q ok %v err %v", at, ok, err)
	}
	if _, _, ok, _ := topUpInput(tu, postgres.TargetRecord{}, time.Hour, now.Add(time.Hour)); ok {
		t.Fatal("a top-up past its listening window is recovered")
	}
	tu.Status, tu.ReceivedCents = domain.TopUpPaymentDetected, 10000
	in, at, ok, err = topUpInput(tu, postgres.TargetRecord{}, time.Hour, now)
	if err != nil || !ok || at != atPayment || !in.Carry.Due {
		t.Fatalf("covered top-up: at %q ok %v err %v due %v, want it credited at once", at, ok, err, in.Carry.Due)
	}
}
