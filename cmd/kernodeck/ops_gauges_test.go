package main

import (
	"reflect"
	"testing"

	"github.com/kernodeck/kernodeck/metrics"
)

// The certificate files watched are those the Temporal client and lib/pq
// load: TEMPORAL_TLS_*, the database URL's sslrootcert and sslcert (over
// PGSSLROOTCERT and PGSSLCERT); none configured, none watched.
func TestCertificateFiles(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := certificateFiles("postgres://kd@db/kernodeck?sslmode=disable", env(nil)); len(got) != 0 {
		t.Fatalf("nothing configured: %v", got)
	}
	got := certificateFiles("postgres://kd@db/kernodeck?sslmode=verify-full&sslrootcert=/etc/kd/pg-ca.pem", env(map[string]string{
		"TEMPORAL_TLS_CLIENT_CERT_PATH":    "/etc/kd/worker.pem",
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/etc/kd/temporal-ca.pem",
		"PGSSLROOTCERT":                    "/ignored/by/the/url.pem",
		"PGSSLCERT":                        "/etc/kd/pg-client.pem",
	}))
	want := []metrics.CertFile{
		{Name: "temporal_client", Path: "/etc/kd/worker.pem"},
		{Name: "temporal_server_ca", Path: "/etc/kd/temporal-ca.pem"},
		{Name: "postgres_root", Path: "/etc/kd/pg-ca.pem"},
		{Name: "postgres_client", Path: "/etc/kd/pg-client.pem"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("certificate files:\n%v\nwant\n%v", got, want)
	}
}
