package rates_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/rates"
)

// history keeps what is recorded; fail makes every write fail.
type history struct {
	rows []rates.Rate
	fail error
}

func (h *history) RecordRate(_ context.Context, r rates.Rate) error {
	if h.fail != nil {
		return h.fail
	}
	h.rows = append(h.rows, r)
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The recorder writes each rate its source gives, and a failed write never
// fails the quote.
func TestRecorderRecordsBestEffort(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	src, err := rates.ParseStatic("BTC=65000,USDT=1", func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	h := &history{}
	rec := &rates.Recorder{Source: src, History: h, Logger: quiet}
	r, err := rec.Rate(context.Background(), "BTC")
	if err != nil || r.USDPerUnit.String() != "65000" {
		t.Fatalf("rate %+v %v", r, err)
	}
	if len(h.rows) != 1 || h.rows[0].Asset != "BTC" || h.rows[0].USDPerUnit.String() != "65000" || h.rows[0].Source != "static" || !h.rows[0].At.Equal(at) {
		t.Fatalf("recorded %+v", h.rows)
	}
	if _, err := rec.Rate(context.Background(), "SOL"); !errors.Is(err, rates.ErrUnknownAsset) || len(h.rows) != 1 {
		t.Fatalf("unknown asset: %v, recorded %+v", err, h.rows)
	}
	h.fail = errors.New("database down")
	if r, err := rec.Rate(context.Background(), "USDT"); err != nil || r.USDPerUnit.String() != "1" {
		t.Fatalf("quote with the history down: %+v %v", r, err)
	}
}

// One tick of the sampler records every asset its source prices, skips
// those it does not, and reports a failed write after trying them all.
func TestSamplerTickRecordsEveryAsset(t *testing.T) {
	src, err := rates.ParseStatic("BTC=65000,ETH=3000,USDT=1,USDC=1,TRX=0.25,LTC=90", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &history{}
	s := &rates.Sampler{Source: src, History: h, Assets: []string{"BTC", "ETH", "USDT", "USDC", "TRX", "SOL", "LTC"}, Logger: quiet}
	n, err := s.Tick(context.Background())
	if err != nil || n != 6 {
		t.Fatalf("tick: %d %v", n, err)
	}
	var got []string
	for _, r := range h.rows {
		got = append(got, r.Asset)
	}
	if !slices.Equal(got, []string{"BTC", "ETH", "USDT", "USDC", "TRX", "LTC"}) {
		t.Fatalf("recorded %v", got)
	}
	h.fail = errors.New("database down")
	if n, err := s.Tick(context.Background()); n != 0 || !errors.Is(err, h.fail) {
		t.Fatalf("tick with the history down: %d %v", n, err)
	}
}
