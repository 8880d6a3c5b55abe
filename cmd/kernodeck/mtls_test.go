package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/devserver/devservertest"
)

// testCA issues certificates for the mutual TLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate and key for name, for a server or a client.
func (ca *testCA) issue(t *testing.T, name string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// tlsFront is a TLS endpoint in front of a plaintext Temporal frontend:
// it requires a client certificate signed by its CA, then relays the
// decrypted HTTP/2 stream to the frontend.
type tlsFront struct {
	addr     string
	accepted atomic.Int64 // connections whose client certificate was verified
	refused  atomic.Int64 // handshakes that failed
}

func startTLSFront(t *testing.T, backend string, cert tls.Certificate, clientCAs *x509.CertPool) *tlsFront {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		NextProtos:   []string{"h2"}, // gRPC insists on ALPN h2
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFront{addr: l.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				tc := c.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					f.refused.Add(1)
					return
				}
				_ = tc.SetDeadline(time.Time{})
				f.accepted.Add(1)
				b, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer b.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(b, tc); done <- struct{}{} }()
				go func() { _, _ = io.Copy(tc, b); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return f
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The worker, the API and the chain watcher reach Temporal only through a
// TLS endpoint that requires a client certificate, configured by the SDK's
// environment variables: an order paid on Litecoin regtest goes to active
// (API update, watcher signal, worker tasks all through it). A client with a
// certificate from another CA, or with none, is refused.
func TestWorkerAndAPIOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	dir := t.TempDir()
	ca := newCA(t, "kernodeck test CA")
	srvCert, srvKey := ca.issue(t, "temporal.kernodeck.test", true)
	cliCert, cliKey := ca.issue(t, "kernodeck-worker", false)
	rogue := newCA(t, "someone else")
	badCert, badKey := rogue.issue(t, "kernodeck-worker", false)

	serverPair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	front := startTLSFront(t, devservertest.Start(t), serverPair, pool)

	env := map[string]string{
		"TEMPORAL_ADDRESS":                 front.addr,
		"TEMPORAL_TLS_CLIENT_CERT_PATH":    writeFile(t, dir, "client.pem", cliCert),
		"TEMPORAL_TLS_CLIENT_KEY_PATH":     writeFile(t, dir, "client.key", cliKey),
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": writeFile(t, dir, "ca.pem", ca.pem),
		"TEMPORAL_TLS_SERVER_NAME":         "temporal.kernodeck.test",
	}
	s := startService(t, env)
	tok := s.customer("mtls@example.com")
	ref := s.newOrder(tok)
	s.payOnChain(tok, ref)
	s.waitStatus(tok, ref, "active")
	if front.accepted.Load() == 0 {
		t.Fatal("no connection went through the TLS endpoint")
	}

	// The same configuration with a certificate of another CA, then with
	// none: the endpoint refuses the handshake and the client cannot connect.
	dial := func(overrides map[string]string) error {
		for k, v := range overrides {
			t.Setenv(k, v)
		}
		cfg, err := config.FromEnv(nil)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := temporalConnection(&cfg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			c.Close()
		}
		return err
	}
	before := front.refused.Load()
	if err := dial(map[string]string{
		"TEMPORAL_TLS_CLIENT_CERT_PATH": writeFile(t, dir, "bad.pem", badCert),
		"TEMPORAL_TLS_CLIENT_KEY_PATH":  writeFile(t, dir, "bad.key", badKey),
	}); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	// The client may give up on the endpoint's alert before the endpoint's
	// own handshake call returns and counts it.
	require.Eventually(t, func() bool { return front.refused.Load() > before }, 10*time.Second, 10*time.Millisecond,
		"the wrong certificate did not reach the TLS endpoint")
	os.Unsetenv("TEMPORAL_TLS_CLIENT_CERT_PATH")
	os.Unsetenv("TEMPORAL_TLS_CLIENT_KEY_PATH")
	if err := dial(nil); err == nil {
		t.Fatal("a client without certificate was accepted")
	}
	// And the right one still connects, so the refusals above are the
	// certificate's doing.
	if err := dial(map[string]string{
		"TEMPORAL_TLS_CLIENT_CERT_PATH": filepath.Join(dir, "client.pem"),
		"TEMPORAL_TLS_CLIENT_KEY_PATH":  filepath.Join(dir, "client.key"),
	}); err != nil {
		t.Fatalf("the right certificate: %v", err)
	}
}
