package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// series gathers m's registry as family{label=value,...} → value, for the
// families asked, and the scrape errors per source.
func series(t *testing.T, m *Metrics, fams ...string) (map[string]float64, map[string]float64) {
	t.Helper()
	got, errs := map[string]float64{}, map[string]float64{}
	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gathered {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case f.GetName() == FamScrapeErrors:
				errs[strings.TrimPrefix(strings.Join(labels, ","), "source=")] = s.GetCounter().GetValue()
			case contains(fams, f.GetName()):
				got[key] = s.GetGauge().GetValue()
			}
		}
	}
	return got, errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// near says whether an age read from the database is want, give or take
// the time the test takes.
func near(got, want float64) bool { return math.Abs(got-want) < 60 }

// On a real database: the oldest mail not delivered (pending or sending,
// not sent or failed), the order unchanged the longest in paid and in
// provisioning, each asset's newest rate, and the unpaid holds of a model
// against its share. Empty, each gauge the alerts read is exported at 0.
func TestBacklogRateAndHoldGauges(t *testing.T) {
	db := pgtest.NewDB(t)
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	share := 25
	m.CollectBacklogs(db)
	m.CollectRates(db, []string{"BTC", "ETH"}, 5*time.Minute)
	m.CollectUnpaidHolds(db, postgres.ProvisionerLocal, &share)
	fams := []string{FamMailOldestWaiting, FamOrdersOldest, FamRateAge, FamRateSampleInterval, FamUnpaidHolds, FamUnpaidHoldsLimit}

	got, errs := series(t, m, fams...)
	for key, want := range map[string]float64{
		FamMailOldestWaiting + "{}":                   0,
		FamOrdersOldest + "{status=paid}":             0,
		FamOrdersOldest + "{status=provisioning}":     0,
		FamRateSampleInterval + "{}":                  300,
		FamUnpaidHolds + "{gpu_model=rtx-a5000}":      0,
		FamUnpaidHoldsLimit + "{gpu_model=rtx-a5000}": 10, // 25 % of 40 GPUs
		FamUnpaidHoldsLimit + "{gpu_model=mi210}":     2,  // 25 % of 8
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("empty database: %s = %v (%v), want %v", key, v, ok, want)
		}
	}
	if _, ok := got[FamRateAge+"{asset=BTC}"]; ok {
		t.Errorf("a rate age without any rate recorded: %v", got)
	}
	if errs["backlogs"] != 0 || errs["rates"] != 0 || errs["unpaid_holds"] != 0 {
		t.Fatalf("scrape errors: %v", errs)
	}

	account, paid := pgtest.AccountWithOrder(t, db, "paid@example.com")
	_, provisioning := pgtest.AccountWithOrder(t, db, "prov@example.com")
	_, unpaid := pgtest.AccountWithOrder(t, db, "unpaid@example.com")
	for _, q := range []struct {
		sql  string
		args []any
	}{
		// Mail: a sent one older than the rest, a failed one, one pending
		// for 40 minutes, one being sent for 10.
		{`INSERT INTO mail_outbox (outbox_key, account_id, template, ref, state, created_at) VALUES
			('k1', $1, 't', 'r', 'sent', now() - interval '3 hours'),
			('k2', $1, 't', 'r', 'failed', now() - interval '2 hours'),
			('k3', $1, 't', 'r', 'pending', now() - interval '40 minutes'),
			('k4', $1, 't', 'r', 'sending', now() - interval '10 minutes')`, []any{account}},
		{`UPDATE orders SET status = 'paid', paid_at = now() - interval '20 minutes', paid_cents = total_cents,
			updated_at = now() - interval '20 minutes' WHERE ref = $1`, []any{paid}},
		{`UPDATE orders SET status = 'provisioning', paid_at = now() - interval '3 hours', paid_cents = total_cents,
			updated_at = now() - interval '5 minutes' WHERE ref = $1`, []any{provisioning}},
		{`INSERT INTO asset_rates (asset, usd_per_unit, source, observed_at) VALUES
			('BTC', 65000, 'test', now() - interval '2 hours'), ('BTC', 65100, 'test', now() - interval '10 minutes'),
			('LTC', 90, 'test', now())`, nil},
		// The unpaid order holds 3 GPUs until later; the paid one holds 4
		// (a paid order's hold is not an unpaid one's).
		{`INSERT INTO capacity_holds (order_ref, gpu_model, gpus, held_until) VALUES
			($1, 'rtx-a5000', 3, now() + interval '1 hour'), ($2, 'rtx-a5000', 4, now() + interval '1 hour')`, []any{unpaid, paid}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}

	got, errs = series(t, m, fams...)
	for key, want := range map[string]float64{
		FamMailOldestWaiting + "{}":               2400,
		FamOrdersOldest + "{status=paid}":         1200,
		FamOrdersOldest + "{status=provisioning}": 300,
		FamRateAge + "{asset=BTC}":                600,
	} {
		if v, ok := got[key]; !ok || !near(v, want) {
			t.Errorf("%s = %v (%v), want about %v", key, v, ok, want)
		}
	}
	if _, ok := got[FamRateAge+"{asset=ETH}"]; ok {
		t.Errorf("ETH has no rate recorded, yet an age: %v", got)
	}
	if _, ok := got[FamRateAge+"{asset=LTC}"]; ok {
		t.Errorf("LTC was not asked for, yet an age: %v", got)
	}
	if v := got[FamUnpaidHolds+"{gpu_model=rtx-a5000}"]; v != 3 {
		t.Errorf("unpaid holds of rtx-a5000: %v, want 3 (the paid order's 4 GPUs do not count)", v)
	}
	if errs["backlogs"] != 0 || errs["rates"] != 0 || errs["unpaid_holds"] != 0 {
		t.Fatalf("scrape errors: %v", errs)
	}

	// The SSH driver counts holds (one host each) against the hosts in
	// service: one unpaid hold, no host, so no share (nil: all of none).
	ssh, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ssh.CollectUnpaidHolds(db, postgres.ProvisionerSSH, nil)
	got, _ = series(t, ssh, FamUnpaidHolds, FamUnpaidHoldsLimit)
	if got[FamUnpaidHolds+"{gpu_model=rtx-a5000}"] != 1 || got[FamUnpaidHoldsLimit+"{gpu_model=rtx-a5000}"] != 0 {
		t.Errorf("SSH driver: %v, want 1 hold of rtx-a5000 and a limit of 0", got)
	}
}

// writeCert writes a self-signed certificate expiring at notAfter.
func writeCert(t *testing.T, path string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: notAfter.Add(-365 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: der}); err != nil {
		t.Fatal(err)
	}
}

// A certificate file's series is the earliest expiry of the certificates
// it holds (a bundle's first to expire), read at each scrape: a renewed
// file shows its new date; a missing file is a scrape error, not a series.
func TestCertificateExpiry(t *testing.T) {
	dir := t.TempDir()
	soon, later := time.Now().Add(48*time.Hour).Truncate(time.Second), time.Now().Add(90*24*time.Hour).Truncate(time.Second)
	bundle, client := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem")
	writeCert(t, bundle, later)
	writeCert(t, bundle, soon)
	writeCert(t, client, later)
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	m.CollectCertificates([]CertFile{{Name: "temporal_server_ca", Path: bundle}, {Name: "temporal_client", Path: client},
		{Name: "postgres_root", Path: filepath.Join(dir, "missing.pem")}})

	got, _ := series(t, m, FamCertExpiry)
	want := map[string]float64{
		FamCertExpiry + "{name=temporal_server_ca}": float64(soon.Unix()),
		FamCertExpiry + "{name=temporal_client}":    float64(later.Unix()),
	}
	if len(got) != len(want) || got[FamCertExpiry+"{name=temporal_server_ca}"] != want[FamCertExpiry+"{name=temporal_server_ca}"] ||
		got[FamCertExpiry+"{name=temporal_client}"] != want[FamCertExpiry+"{name=temporal_client}"] {
		t.Fatalf("certificates: %v, want %v", got, want)
	}
	// Renewed: the bundle now holds one certificate, a year away.
	renewed := time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second)
	if err := os.Remove(bundle); err != nil {
		t.Fatal(err)
	}
	writeCert(t, bundle, renewed)
	got, errs := series(t, m, FamCertExpiry)
	if got[FamCertExpiry+"{name=temporal_server_ca}"] != float64(renewed.Unix()) {
		t.Fatalf("renewed bundle: %v, want %d", got, renewed.Unix())
	}
	if errs["certificates"] < 1 {
		t.Fatalf("the missing file was not counted as a scrape error: %v", errs)
	}
}

// The payouts' gauges on a real database: every waiting status exported
// (0 when empty), then a payout approved 3 hours ago counted with its age.
func TestPayoutGauges(t *testing.T) {
	db := pgtest.NewDB(t)
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	m.CollectPayouts(db)
	got, errs := series(t, m, FamPayoutsOldest, FamPayoutsWaiting)
	for _, st := range PayoutStatuses {
		if v, ok := got[FamPayoutsOldest+"{status="+st+"}"]; !ok || v != 0 {
			t.Errorf("empty database: %s age %v (%v)", st, v, ok)
		}
	}
	if errs["payouts"] != 0 {
		t.Fatalf("scrape errors on an empty database: %v", errs)
	}
	account, _ := pgtest.AccountWithOrder(t, db, "payout@example.com")
	if _, err := db.Exec(`INSERT INTO payouts (ref, account_id, asset, network, address, amount_cents, fee_cents, decimals,
		amount_base, rate, rate_at, status, needs_two, request_key, updated_at)
		VALUES ('PO-G1', $1, 'LTC', 'litecoin', 'rltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080', 5000, 10, 8, 4990000, 100, now(),
			'approved', false, 'g1', now() - interval '3 hours')`, account); err != nil {
		t.Fatal(err)
	}
	got, errs = series(t, m, FamPayoutsOldest, FamPayoutsWaiting)
	if v := got[FamPayoutsOldest+"{status=approved}"]; !near(v, 3*3600) {
		t.Errorf("approved for 3 hours: %v", v)
	}
	if v := got[FamPayoutsWaiting+"{status=approved}"]; v != 1 {
		t.Errorf("approved payouts: %v", v)
	}
	if errs["payouts"] != 0 {
		t.Fatalf("scrape errors: %v", errs)
	}
}
