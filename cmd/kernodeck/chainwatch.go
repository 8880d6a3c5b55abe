package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/url"
	"os"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
	"github.com/kernodeck/kernodeck/chainwatch/solana"
	"github.com/kernodeck/kernodeck/chainwatch/tron"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/metrics"
	"github.com/kernodeck/kernodeck/postgres"
)

// runner is a watcher's main loop.
type runner interface {
	Run(ctx context.Context) error
}

// serveChainwatch runs one watcher per network with a node URL configured.
// Each takes its network's lease, so running this on several machines keeps
// one active watcher per network.
func serveChainwatch(ctx context.Context, a *app.App, db *postgres.DB, logger *slog.Logger) error {
	pcfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s:%d", host, os.Getpid())
	g, gctx := errgroup.WithContext(ctx)
	started := 0
	for network, nodeURL := range pcfg.NodeURLs {
		r, err := newWatcher(gctx, network, nodeURL, pcfg, a, db, holder, logger)
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

// newWatcher dials network's node and builds its watcher (package app).
func newWatcher(ctx context.Context, network, nodeURL string, pcfg config.Payments, a *app.App, db *postgres.DB,
	holder string, logger *slog.Logger) (runner, error) {
	opts := app.WatcherOptions{Confirmations: pcfg.Confirmations[network], Holder: holder, Poll: pcfg.WatcherPoll,
		Backfill: 100, Dust: pcfg.Dust[network]}
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
		opts.Mempool, opts.Broadcaster = chain, chain
		w := a.Watcher(chain, opts)
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
		return w, nil
	case "ethereum":
		tokens := map[string]string{}
		for asset, contract := range pcfg.Tokens["ethereum"] {
			tokens[contract] = asset
		}
		chain, err := evm.New(ctx, evm.Config{RPCURL: nodeURL, ChainID: pcfg.EthereumChainID, Tokens: tokens, Finality: pcfg.EthereumFinality})
		if err != nil {
			return nil, err
		}
		if pcfg.EthereumFinality == "finalized" {
			opts.Confirmations = 1 // the tip itself is final
		}
		w := a.Watcher(chain, opts)
		chain.SetWatched(evm.IndexFilter(w.Index()))
		if pcfg.EthereumWSURL != "" {
			w.Notifier = &evm.Heads{URL: pcfg.EthereumWSURL}
		}
		return w, nil
	case "tron":
		chain, err := tron.New(tron.Config{URL: nodeURL, Tokens: pcfg.Tokens["tron"]})
		if err != nil {
			return nil, err
		}
		return a.Watcher(chain, opts), nil
	case "solana":
		// Solana Pay: signatures per reference key at "finalized".
		var dust *big.Int
		if units, ok := opts.Dust[solana.Asset]; ok {
			dust = big.NewInt(units)
		}
		return &solana.Watcher{RPCURL: nodeURL, Store: db, Signaler: a.Signaler(), Holder: holder, LeaseTTL: app.WatcherLeaseTTL,
			Poll: pcfg.WatcherPoll, Logger: logger.With("component", "chainwatch"), Dust: dust}, nil
	default:
		return nil, fmt.Errorf("unknown network %q", network)
	}
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
	// The watchers' part of the application only: no payment service or
	// machine driver (their keys need not be on this machine).
	a := app.New(app.Config{DB: db, Temporal: tc, Keyring: prov.keyring, Metrics: m, Logger: logger})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveMetrics(gctx, "chainwatch", m, readiness("chainwatch", db, tc), logger) })
	g.Go(func() error { return serveChainwatch(gctx, a, db, logger) })
	return g.Wait()
}
