package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"

	"github.com/kernodeck/kernodeck/apiclient"
)

// common are the flags the loads share.
type common struct {
	api          string
	api2         string
	dir          string
	supportToken string
	dbURL        string
	temporal     string
	namespace    string
	model        string
	client       *apiclient.Client
	http         *http.Client
}

func (c *common) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.api, "api", "http://127.0.0.1:38080", "the API's base URL (loopback only)")
	fs.StringVar(&c.supportToken, "support-token", "kdload-support-token-0123456789", "a support agent token of the API")
	fs.StringVar(&c.dbURL, "db", "postgres://postgres@127.0.0.1:5432/kd_load?sslmode=disable", "the service's database")
	fs.StringVar(&c.temporal, "temporal", "127.0.0.1:37233", "Temporal frontend")
	fs.StringVar(&c.namespace, "namespace", "default", "Temporal namespace")
	fs.StringVar(&c.model, "model", "rtx-a5000", "GPU model ordered")
}

// prodlikeFlags registers the flags of a run on scripts/prodlike.sh's
// deployment and takes the defaults of those common.flags registered from
// the environment prodlike gives the command it runs; a flag given wins.
func (c *common) prodlikeFlags(fs *flag.FlagSet) {
	for flagName, k := range map[string]string{"api": "KD_PRODLIKE_API1", "db": "KERNODECK_DATABASE_URL",
		"temporal": "TEMPORAL_ADDRESS", "namespace": "TEMPORAL_NAMESPACE"} {
		if v := os.Getenv(k); v != "" {
			_ = fs.Set(flagName, v)
		}
	}
	fs.StringVar(&c.api2, "api2", envOr("KD_PRODLIKE_API2", ""), "a second API replica (requests alternate between the two)")
	fs.StringVar(&c.dir, "dir", envOr("KD_PRODLIKE_DIR", ""), "scripts/prodlike.sh's state directory (pids/NAME)")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// replicas are clients of the API at -api and at -api2 (-api twice without
// it), after loopbackOnly's check of both; c.client stays -api's.
func (c *common) replicas() ([2]*apiclient.Client, error) {
	if err := c.loopbackOnly(); err != nil {
		return [2]*apiclient.Client{}, err
	}
	cl := [2]*apiclient.Client{c.client, c.client}
	if c.api2 == "" {
		return cl, nil
	}
	first := c.api
	c.api = c.api2
	err := c.loopbackOnly()
	cl[1] = c.client
	c.api, c.client, c.http = first, cl[0], cl[0].HTTP
	return cl, err
}

// prodlikePID is the PID scripts/prodlike.sh recorded for one of its
// processes (kept current across its restarts).
func (c *common) prodlikePID(name string) (int, error) {
	raw, err := os.ReadFile(c.dir + "/pids/" + name)
	if err != nil {
		return 0, err
	}
	var pid int
	_, err = fmt.Sscan(string(raw), &pid)
	return pid, err
}

// dialTemporal connects to the deployment's Temporal as its processes do
// (TEMPORAL_* settings: address, namespace, mutual TLS).
func (c *common) dialTemporal() (client.Client, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{})
	if err != nil {
		return nil, err
	}
	if opts.HostPort == "" {
		opts.HostPort = c.temporal
	}
	if opts.Namespace == "" {
		opts.Namespace = c.namespace
	}
	opts.Logger = log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{} // as app.ClientOptions
	return client.Dial(opts)
}

// thisMachine are the addresses of this machine: loopback, and
// 192.0.2.0/24 (TEST-NET-1, never routed), the network namespaces of
// scripts/prodlike.sh's three machines (KD_PRODLIKE_NETNS=1).
var thisMachine = net.IPNet{IP: net.IPv4(192, 0, 2, 0), Mask: net.CIDRMask(24, 32)}

// loopbackOnly refuses to send load anywhere but this machine.
func (c *common) loopbackOnly() error {
	for _, raw := range []string{c.api, "tcp://" + c.temporal} {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback() && !thisMachine.Contains(ip)) {
			return fmt.Errorf("%s is not a loopback address: kdload only loads this machine", raw)
		}
	}
	c.client = apiclient.New(c.api)
	c.http = c.client.HTTP
	return nil
}

// customer registers customer number i and returns its bearer token. Each
// group of 5 registers from its own documentation address (TEST-NET-3).
func (c *common) customer(ctx context.Context, email string, i int) (string, error) {
	return c.client.Register(ctx, fmt.Sprintf("203.0.113.%d", 1+(i/5)%250), email)
}

// createOrder creates an order of one lot for rentalDays and returns its reference.
func (c *common) createOrder(ctx context.Context, token string) (string, error) {
	return c.client.CreateOrder(ctx, token, c.model, rentalDays)
}

// attribute pays an order by support attribution (the full amount due).
func (c *common) attribute(ctx context.Context, ref string) error {
	return c.client.Attribute(ctx, c.supportToken, ref)
}

// call sends a JSON request and decodes a JSON answer into out (if not nil).
func (c *common) call(ctx context.Context, method, path, token string, body, out any) (int, error) {
	return c.client.Call(ctx, "", method, path, token, body, out)
}

// latencies summarises durations.
type latencies []time.Duration

func (l latencies) q(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// parallel runs fn(i) for i in [0, n) on conc goroutines; the first error
// stops the rest.
func parallel(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	errc := make(chan error, conc)
	for range conc {
		go func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
			errc <- nil
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	for range conc {
		<-errc
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
