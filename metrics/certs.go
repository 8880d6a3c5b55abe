package metrics

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// FamCertExpiry is when each certificate file the process uses expires.
const FamCertExpiry = "kernodeck_certificate_expiry_timestamp_seconds"

// CertFile is a PEM file of certificates the process uses, by the name its
// series carries (temporal_client, temporal_server_ca, postgres_root...).
type CertFile struct {
	Name string
	Path string
}

// CollectCertificates exports, for each file, the earliest expiry
// (NotAfter, Unix seconds) of the certificates it holds, read at scrape
// time: a renewed file shows at once (a process that loaded the old one at
// start, as the Temporal client does, still needs a restart). A file that
// cannot be read or holds no certificate is counted in
// kernodeck_db_scrape_errors_total{source="certificates"} and left out.
// Nothing is registered without files.
func (m *Metrics) CollectCertificates(files []CertFile) {
	if len(files) == 0 {
		return
	}
	desc := prometheus.NewDesc(FamCertExpiry, "Earliest expiry (NotAfter, Unix time) of the certificates in the file, by its use.", []string{"name"}, nil)
	m.scrapeErrors().WithLabelValues("certificates")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{desc}, source: "certificates", errors: m.scrapeErrors(),
		collect: func(_ context.Context, ch chan<- prometheus.Metric) error {
			var errs []error
			for _, f := range files {
				notAfter, err := earliestExpiry(f.Path)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
					continue
				}
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(notAfter), f.Name)
			}
			return errors.Join(errs...)
		},
	})
}

// earliestExpiry is the earliest NotAfter of the certificates in a PEM file.
func earliestExpiry(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var ends []int64
	for {
		var b *pem.Block
		if b, raw = pem.Decode(raw); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return 0, err
		}
		ends = append(ends, c.NotAfter.Unix())
	}
	if len(ends) == 0 {
		return 0, errors.New("no certificate in the file")
	}
	return slices.Min(ends), nil
}
