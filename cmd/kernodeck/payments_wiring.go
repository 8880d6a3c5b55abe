package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/payout"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/rates"
	"github.com/kernodeck/kernodeck/recovery"
)

// paymentsFromEnv reads the payments configuration and builds the service.
func paymentsFromEnv(db *postgres.DB, logger *slog.Logger) (*payments.Service, config.Payments, error) {
	cfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return nil, cfg, fmt.Errorf("config: %w", err)
	}
	svc, err := newPayments(cfg, db, logger)
	if err != nil {
		return nil, cfg, err
	}
	return svc, cfg, checkAddresses(svc, db, logger)
}

// checkAddresses refuses a watch-only key other than the one recorded
// for its network (until `kernodeck xpub confirm`), and moves any address
// index still below an address already handed out (a database restored to
// an earlier point): a start never hands out an address twice, nor sends
// new payments to a wallet nobody confirmed. docs/recovery.md.
func checkAddresses(svc *payments.Service, db *postgres.DB, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accounts := map[string]*hdwallet.Account{}
	for network, n := range svc.Networks {
		if acc, ok := n.Deriver.(*hdwallet.Account); ok {
			accounts[network] = acc
		}
	}
	if err := recovery.CheckAccountKeys(ctx, db, accounts); err != nil {
		return err
	}
	moved, err := db.AdvanceHDIndexes(ctx, 0)
	if err != nil {
		return err
	}
	for _, m := range moved {
		logger.Warn("address index was below addresses already handed out (database restored?): moved past them",
			"network", m.Network, "from", m.From, "to", m.To)
	}
	return nil
}

// newPayments builds the payment request service from the configuration:
// the rate source (Kraken's public ticker, or configured static rates),
// checked for freshness, and the watch-only account of each configured
// network. A network without its key (or Solana without its address) is
// simply not offered.
func newPayments(cfg config.Payments, db *postgres.DB, logger *slog.Logger) (*payments.Service, error) {
	var src rates.Source
	switch cfg.RateSource {
	case "static":
		s, err := rates.ParseStatic(cfg.StaticRates, nil)
		if err != nil {
			return nil, fmt.Errorf("KERNODECK_STATIC_RATES: %w", err)
		}
		src = s
	default:
		src = &rates.Kraken{BaseURL: cfg.KrakenURL, Client: &http.Client{Timeout: 10 * time.Second}}
	}
	svc := &payments.Service{
		Store:      db,
		Rates:      rates.Fresh{Source: src, MaxAge: cfg.RateMaxAge},
		Networks:   map[string]payments.Network{},
		Deadline:   cfg.Deadline,
		WatchAfter: cfg.WatchAfter,
	}
	for network, xpub := range cfg.AccountKeys {
		acc, err := hdwallet.ParseAccountKey(hdwallet.Network(cfg.KeyNetworks[network]), xpub)
		if err != nil {
			return nil, fmt.Errorf("watch-only key for %s: %w", network, err)
		}
		svc.Networks[network] = payments.Network{Deriver: acc, Tokens: cfg.Tokens[network], ChainID: cfg.EthereumChainID}
	}
	if cfg.SolanaAddress != "" {
		svc.Networks["solana"] = payments.Network{ShopAddress: cfg.SolanaAddress}
	}
	var enabled []string
	for _, m := range svc.Enabled() {
		enabled = append(enabled, m.Asset+"/"+m.Network)
	}
	logger.Info("payment methods", "enabled", enabled, "rates", cfg.RateSource)
	return svc, nil
}

// payoutShop builds the payouts' chain side: the address checks (never one
// of the shop's own addresses), and a wallet for each Bitcoin-like
// network whose key origin is configured (its batches are PSBTs).
func payoutShop(svc *payments.Service, pcfg config.Payments, db *postgres.DB) (*payout.Shop, config.Payouts, error) {
	cfg, err := config.PayoutsFromEnv(nil)
	if err != nil {
		return nil, cfg, fmt.Errorf("config: %w", err)
	}
	shop := &payout.Shop{
		Addresses: payout.Addresses{Networks: pcfg.KeyNetworks, Tokens: pcfg.Tokens, Own: payout.OwnAddressesFunc(
			func(ctx context.Context, network, address string) (bool, error) {
				// Solana's receiving address is configured, and handed out
				// only once a request is made there.
				if network == domain.NetworkSolana && address == pcfg.SolanaAddress {
					return true, nil
				}
				return db.IsShopAddress(ctx, network, address)
			})},
		Wallets:  map[string]payout.Wallet{},
		FeeRates: cfg.FeeRates,
		ChainID:  pcfg.EthereumChainID,
	}
	for network, origin := range pcfg.KeyOrigins {
		acc, ok := svc.Networks[network].Deriver.(*hdwallet.Account)
		if !ok {
			return nil, cfg, fmt.Errorf("KERNODECK_%s_KEY_ORIGIN is set but %s has no watch-only key", strings.ToUpper(network), network)
		}
		w := payout.Wallet{Network: acc.Network(), Account: acc, Origin: origin}
		if err := acc.CheckOrigin(origin); err != nil {
			return nil, cfg, fmt.Errorf("KERNODECK_%s_KEY_ORIGIN: %w", strings.ToUpper(network), err)
		}
		shop.Wallets[network] = w
	}
	return shop, cfg, nil
}
