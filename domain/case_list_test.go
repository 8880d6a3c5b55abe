package domain

import (
	"testing"
	"time"
)

// The list's filter validates itself: days are Paris days ("au" included),
// amounts are USD with a comma or a point, and what is wrong is refused
// naming its field, in French.
func TestParseCaseFilter(t *testing.T) {
	f, err := ParseCaseFilter(CaseQuery{Status: "active", Model: "b200", Method: "USDT/tron", From: "2026-12-03", To: "2026-12-03",
		Min: "12,5", Max: "1 000,05 USD", Ref: "kd-7q", Email: " Zoe@Example ", Name: "  Zoé   Lo ", TxID: "ab12"}, 50)
	if err != nil {
		t.Fatal(err)
	}
	// Winter: Paris is UTC+1; the 3rd, included, is [2 Dec 23:00Z, 3 Dec 23:00Z).
	if !f.From.Equal(time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC)) || !f.To.Equal(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)) {
		t.Fatalf("period %s .. %s", f.From, f.To)
	}
	if *f.MinCents != 1250 || *f.MaxCents != 100005 || f.RefPrefix != "KD-7Q" || f.Email != "zoe@example" || f.Name != "zoé lo" {
		t.Fatalf("parsed %+v", f)
	}
	if a, n := f.MethodParts(); a != "USDT" || n != NetworkTron {
		t.Fatalf("method %q %q", a, n)
	}
	summer, err := ParseCaseFilter(CaseQuery{Kind: TargetTopUp, From: "1/7/2026"}, 50)
	if err != nil || !summer.From.Equal(time.Date(2026, 6, 30, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("summer: %s %v", summer.From, err)
	}

	c := CaseCursor{CreatedAt: time.Date(2026, 12, 3, 14, 5, 6, 123456000, time.UTC), Ref: "KD-ABCDEF1234"}
	back, err := ParseCaseFilter(CaseQuery{After: c.String()}, 50)
	if err != nil || back.After == nil || !back.After.CreatedAt.Equal(c.CreatedAt) || back.After.Ref != c.Ref {
		t.Fatalf("cursor %s: %+v %v", c, back.After, err)
	}

	for name, tc := range map[string]struct {
		q     CaseQuery
		field string
	}{
		"unknown kind":             {CaseQuery{Kind: "refund"}, "type"},
		"the balance for payouts":  {CaseQuery{Kind: TargetPayout, Method: "balance"}, "moyen"},
		"an order's status":        {CaseQuery{Kind: TargetPayout, Status: "active"}, "statut"},
		"unknown status":           {CaseQuery{Status: "lost"}, "statut"},
		"a top-up's status":        {CaseQuery{Status: "credited"}, "statut"},
		"a model for top-ups":      {CaseQuery{Kind: TargetTopUp, Model: "b200"}, "modele"},
		"the balance for top-ups":  {CaseQuery{Kind: TargetTopUp, Method: "balance"}, "moyen"},
		"an asset off its network": {CaseQuery{Method: "BTC/ethereum"}, "moyen"},
		"not a date":               {CaseQuery{From: "2026-13-01"}, "du"},
		"a day November lacks":     {CaseQuery{To: "31/11/2026"}, "au"},
		"a two-digit year":         {CaseQuery{To: "03/12/26"}, "au"},
		"period the wrong way":     {CaseQuery{From: "2026-12-04", To: "2026-12-03"}, "au"},
		"min above max":            {CaseQuery{Min: "50", Max: "49,99"}, "max"},
		"a negative amount":        {CaseQuery{Min: "-5"}, "min"},
		"three decimals":           {CaseQuery{Max: "1,005"}, "max"},
		"a short email":            {CaseQuery{Email: "zo"}, "email"},
		"a short name":             {CaseQuery{Name: "z"}, "nom"},
		"a reference with a %":     {CaseQuery{Ref: "KD-%"}, "ref"},
		"a txid with a _":          {CaseQuery{TxID: "ab_cd"}, "txid"},
		"a forged cursor":          {CaseQuery{After: "1.KD-A'--"}, "apres"},
		"after and before":         {CaseQuery{After: c.String(), Before: c.String()}, "apres"},
	} {
		_, err := ParseCaseFilter(tc.q, 50)
		if ErrorCode(err) != ECodeInvalid {
			t.Errorf("%s: %v, want invalid", name, err)
			continue
		}
		if e := err.(*Error); e.Field != tc.field || e.Message == "" {
			t.Errorf("%s: field %q (%s), want %q", name, e.Field, e.Message, tc.field)
		}
	}
	if _, err := ParseCaseFilter(CaseQuery{}, CaseListMaxPage+1); ErrorCode(err) != ECodeInvalid {
		t.Errorf("a page of %d: %v", CaseListMaxPage+1, err)
	}
}
