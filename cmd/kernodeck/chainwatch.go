package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/url"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
	"github.com/kernodeck/kernodeck/chainwatch/solana"
	"github.com/kernodeck/kernodeck/chainwatch/tron"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres"
)

// watcherLeaseTTL is how long a watcher that died keeps its network's lease:
// its successor (a restarted process has another holder name) waits that
// long before it follows the chain again. The lease is renewed at every poll
// (2 s); a step longer than this only lets a second watcher run beside it,
// which records each payment once anyway. The chaos run measured 30 s
// stalls after each chainwatch kill with the 30 s default.
const watcherLeaseTTL = 10 * time.Second

// runner is a watcher's main loop.
type runner interface {
	Run(ctx context.Context) error
}

// serveChainwatch runs one watcher per network with a node URL configured.
// Each takes its network's lease, so running this on several machines keeps
// one active watcher per network.
func serveChainwatch(ctx context.Context, db *postgres.DB, tc client.Client, m *metrics.Metrics, logger *slog.Logger) error {
	pcfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s:%d", host, os.Getpid())
	g, gctx := errgroup.WithContext(ctx)
	started := 0
	for network, nodeURL := range pcfg.NodeURLs {
		r, err := newWatcher(gctx, network, nodeURL, pcfg, db, tc, holder, m.Chains, logger)
		if err != nil {
			return fmt.Errorf("%s watcher: %w", network, err)
		}
		if r == nil {
			continue
		}
		started++
		logger.Info("chain watcher", "network", network, "confirmations", pcfg.Confirmations[network])
		g.Go(func() error { return r.Run(gctx) })
	}
	if started == 0 {
		logger.Info("no chain watcher: no KERNODECK_<NETWORK>_NODE_URL configured")
		<-ctx.Done()
		return nil
	}
	return g.Wait()
}

func newWatcher(ctx context.Context, network, nodeURL string, pcfg config.Payments, db *postgres.DB,
	tc client.Client, holder string, chains *metrics.Chains, logger *slog.Logger) (runner, error) {
	w := &chainwatch.Watcher{
		Store:    chains.Store(db),
		Signaler: chainwatch.TemporalSignaler{Client: tc},
		Policy:   chainwatch.Policy{Confirmations: pcfg.Confirmations[network]},
		Holder:   holder,
		LeaseTTL: watcherLeaseTTL,
		Poll:     pcfg.WatcherPoll,
		Backfill: 100,
		Logger:   logger.With("component", "chainwatch"),
		Dust:     map[string]*big.Int{},
	}
	for asset, units := range pcfg.Dust[network] {
		w.Dust[asset] = big.NewInt(units)
	}
	switch network {
	case "bitcoin", "litecoin":
		u, err := url.Parse(nodeURL)
		if err != nil {
			return nil, fmt.Errorf("node URL: %w", err)
		}
		pass, _ := u.User.Password()
		chain, err := utxo.New(utxo.Config{Host: u.Scheme + "://" + u.Host, User: u.User.Username(), Pass: pass, Network: network})
		if err != nil {
			return nil, err
		}
		w.Chain = chain
		if addr := pcfg.P2PAddrs[network]; addr != "" {
			// The key network names the chain: "litecoin-regtest" -> regtest.
			chainName := "main"
			if _, c, ok := strings.Cut(pcfg.KeyNetworks[network], "-"); ok {
				chainName = map[string]string{"testnet": "test", "regtest": "regtest"}[c]
			}
			params, err := utxo.Params(network, chainName)
			if err != nil {
				return nil, err
			}
			w.Notifier = &utxo.P2P{Addr: addr, Params: params, Asset: chain.Asset()}
		}
	case "ethereum":
		tokens := map[string]string{}
		for asset, contract := range pcfg.Tokens["ethereum"] {
			tokens[contract] = asset
		}
		chain, err := evm.New(ctx, evm.Config{RPCURL: nodeURL, ChainID: pcfg.EthereumChainID, Tokens: tokens, Finality: pcfg.EthereumFinality})
		if err != nil {
			return nil, err
		}
		w.Chain = chain
		chain.SetWatched(evm.IndexFilter(w.Index()))
		if pcfg.EthereumWSURL != "" {
			w.Notifier = &evm.Heads{URL: pcfg.EthereumWSURL}
		}
		if pcfg.EthereumFinality == "finalized" {
			w.Policy.Confirmations = 1 // the tip itself is final
		}
	case "tron":
		chain, err := tron.New(tron.Config{URL: nodeURL, Tokens: pcfg.Tokens["tron"]})
		if err != nil {
			return nil, err
		}
		w.Chain = chain
	case "solana":
		// Solana Pay: signatures per reference key at "finalized".
		return &solana.Watcher{RPCURL: nodeURL, Store: db, Signaler: w.Signaler, Holder: holder, LeaseTTL: watcherLeaseTTL,
			Poll: pcfg.WatcherPoll, Logger: w.Logger, Dust: w.Dust[solana.Asset]}, nil
	default:
		return nil, fmt.Errorf("unknown network %q", network)
	}
	w.Chain = chains.Chain(w.Chain)
	return w, nil
}

func runChainwatch(ctx context.Context, cfg config.Config, prov provisioning, m *metrics.Metrics, logger *slog.Logger) error {
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	tc, err := dialTemporal(prov, m, logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	m.CollectChainPayments(db)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveMetrics(gctx, "chainwatch", m, readiness(db, tc), logger) })
	g.Go(func() error { return serveChainwatch(gctx, db, tc, m, logger) })
	return g.Wait()
}
