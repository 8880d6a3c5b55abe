package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/postgres"
)

// startDevNodes starts the local chains named in KERNODECK_DEV_NODES
// ("bitcoin,litecoin,ethereum") and points the payments configuration at them with
// development keys, unless the operator configured those already.
func startDevNodes(ctx context.Context, dir string, logger *slog.Logger) (func(), error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	setDefault := func(k, v string) {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
	if os.Getenv("KERNODECK_DEV_NODES") == "" {
		return stop, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, name := range strings.Split(os.Getenv("KERNODECK_DEV_NODES"), ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "bitcoin":
			n, err := devnodes.StartBitcoin(ctx, dir)
			if err != nil {
				stop()
				return nil, err
			}
			stops = append(stops, n.Stop)
			setDefault("KERNODECK_BITCOIN_NODE_URL", devnodes.BitcoinURL)
			setDefault("KERNODECK_XPUB_BITCOIN", devnodes.BitcoinRegtestXpub)
			setDefault("KERNODECK_BITCOIN_KEY_ORIGIN", devnodes.TestKeyOrigin("84'/1'/0'"))
			setDefault("KERNODECK_BITCOIN_KEY_NETWORK", "bitcoin-regtest")
			setDefault("KERNODECK_BITCOIN_P2P", fmt.Sprintf("127.0.0.1:%d", devnodes.BitcoinP2PPort))
			logger.Info("bitcoin regtest node (btcd)", "rpc", "127.0.0.1", "port", devnodes.BitcoinRPCPort)
		case "litecoin":
			n, err := devnodes.StartLitecoin(ctx, dir)
			if err != nil {
				stop()
				return nil, err
			}
			stops = append(stops, n.Stop)
			setDefault("KERNODECK_LITECOIN_NODE_URL", devnodes.LitecoinURL)
			setDefault("KERNODECK_XPUB_LITECOIN", devnodes.LitecoinRegtestXpub)
			setDefault("KERNODECK_LITECOIN_KEY_ORIGIN", devnodes.TestKeyOrigin("84'/1'/0'")) // payout PSBTs
			setDefault("KERNODECK_LITECOIN_KEY_NETWORK", "litecoin-regtest")
			setDefault("KERNODECK_LITECOIN_P2P", fmt.Sprintf("127.0.0.1:%d", devnodes.LitecoinP2PPort))
			logger.Info("litecoin regtest node", "rpc", "127.0.0.1", "port", devnodes.LitecoinRPCPort)
		case "ethereum":
			n, err := devnodes.StartGeth(ctx, dir)
			if err != nil {
				stop()
				return nil, err
			}
			stops = append(stops, n.Stop)
			setDefault("KERNODECK_ETHEREUM_NODE_URL", devnodes.GethURL)
			setDefault("KERNODECK_XPUB_ETHEREUM", devnodes.EthereumXpub)
			setDefault("KERNODECK_ETHEREUM_CHAIN_ID", "1337")
			setDefault("KERNODECK_ETHEREUM_WS_URL", fmt.Sprintf("ws://127.0.0.1:%d", devnodes.GethWSPort))
			logger.Info("geth dev node", "rpc", devnodes.GethURL)
		default:
			stop()
			return nil, fmt.Errorf("KERNODECK_DEV_NODES: unknown node %q (bitcoin, litecoin, ethereum)", name)
		}
	}
	return stop, nil
}

// runDevPay pays a payment request on the local development chain:
// `kernodeck dev pay PI-XXXXXXXXXX`.
func runDevPay(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: kernodeck dev pay <payment request id>")
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	in, err := db.Intent(ctx, args[0])
	if err != nil {
		return err
	}
	pcfg, err := config.PaymentsFromEnv(nil)
	if err != nil {
		return err
	}
	txid, err := devnodes.Pay(ctx, in, int(pcfg.Confirmations[in.Network]))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "paid %s %s to %s on the local %s chain: %s\n", in.Amount, in.Asset, in.Address, in.Network, txid)
	return nil
}
