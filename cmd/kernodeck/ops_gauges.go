package main

import (
	"net/url"
	"os"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/rates"
)

// collectOperations exports the gauges behind the backlog and age alerts
// (the processes that export the order gauges do): the mail backlog's age,
// the orders unchanged in paid and provisioning, the rates' ages and the
// unpaid holds against their share, the payouts' ages per status.
func collectOperations(m *metrics.Metrics, db *postgres.DB, a *app.App, provisioner string) error {
	quotas, err := config.QuotasFromEnv(nil)
	if err != nil {
		return err
	}
	m.CollectBacklogs(db)
	m.CollectPayouts(db)
	if s := a.RateSampler(); s != nil {
		interval := s.Interval
		if interval <= 0 {
			interval = rates.DefaultSampleInterval
		}
		m.CollectRates(db, s.Assets, interval)
	}
	share := quotas.HoldShare
	m.CollectUnpaidHolds(db, provisioner, &share)
	return nil
}

// certificateFiles are the certificate files this process uses, by name,
// for kernodeck_certificate_expiry_timestamp_seconds: the Temporal client's
// certificate and the CA it trusts (TEMPORAL_TLS_*, as the SDK's envconfig
// reads them), and PostgreSQL's root and client certificates (the database
// URL's sslrootcert and sslcert, or lib/pq's PGSSLROOTCERT and PGSSLCERT).
func certificateFiles(databaseURL string, getenv func(string) string) []metrics.CertFile {
	var out []metrics.CertFile
	add := func(name, path string) {
		if path != "" {
			out = append(out, metrics.CertFile{Name: name, Path: path})
		}
	}
	add("temporal_client", getenv("TEMPORAL_TLS_CLIENT_CERT_PATH"))
	add("temporal_server_ca", getenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH"))
	root, cert := getenv("PGSSLROOTCERT"), getenv("PGSSLCERT")
	if u, err := url.Parse(databaseURL); err == nil {
		if v := u.Query().Get("sslrootcert"); v != "" && v != "system" {
			root = v
		}
		if v := u.Query().Get("sslcert"); v != "" {
			cert = v
		}
	}
	add("postgres_root", root)
	add("postgres_client", cert)
	return out
}

// collectCertificates exports the expiry of the certificate files this
// process uses.
func collectCertificates(m *metrics.Metrics, cfg config.Config) {
	m.CollectCertificates(certificateFiles(cfg.DatabaseURL, os.Getenv))
}
