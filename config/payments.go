package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/rates"
)

// Payments is the crypto payments' configuration: rates, payment requests,
// watch-only keys, token contracts, nodes and confirmation policies.
type Payments struct {
	RateSource       string                       // KERNODECK_RATES: "kraken" or "static"
	StaticRates      string                       // KERNODECK_STATIC_RATES: "BTC=65000,ETH=3000,..."
	KrakenURL        string                       // KERNODECK_KRAKEN_URL
	RateMaxAge       time.Duration                // KERNODECK_RATE_MAX_AGE
	Deadline         time.Duration                // KERNODECK_INTENT_DEADLINE
	WatchAfter       time.Duration                // KERNODECK_INTENT_WATCH_AFTER
	AccountKeys      map[string]string            // network -> account xpub: KERNODECK_XPUB_<NETWORK>
	KeyNetworks      map[string]string            // network -> hdwallet network: KERNODECK_<NETWORK>_KEY_NETWORK
	SolanaAddress    string                       // KERNODECK_SOLANA_ADDRESS
	EthereumChainID  int64                        // KERNODECK_ETHEREUM_CHAIN_ID
	Tokens           map[string]map[string]string // network -> asset -> contract
	NodeURLs         map[string]string            // network -> node endpoint: KERNODECK_<NETWORK>_NODE_URL
	Confirmations    map[string]int64             // KERNODECK_CONFIRMATIONS: "bitcoin=2,litecoin=6,..."
	EthereumFinality string                       // KERNODECK_ETHEREUM_FINALITY: "latest" or "finalized"
	WatcherPoll      time.Duration                // KERNODECK_WATCHER_POLL
	Dust             map[string]map[string]int64  // network -> asset -> base units: KERNODECK_DUST
	P2PAddrs         map[string]string            // bitcoin/litecoin -> node's peer-to-peer host:port: KERNODECK_<NETWORK>_P2P
	EthereumWSURL    string                       // KERNODECK_ETHEREUM_WS_URL (eth_subscribe)
	// RateSampleInterval (KERNODECK_RATE_SAMPLE_INTERVAL): how often the
	// worker records every priced asset's rate; at most rates.ValueWindow.
	RateSampleInterval time.Duration
	// ValueTolerance (KERNODECK_VALUE_TOLERANCE, "2%" or "0.02"): how far
	// support's value of a payment in another asset may be from its amount
	// at the rate observed at its reception; a fraction above 0, at most 0.5.
	ValueTolerance decimal.Decimal
	// KeyOrigins (KERNODECK_BITCOIN_KEY_ORIGIN, KERNODECK_LITECOIN_KEY_ORIGIN):
	// where the account key sits in the signing wallet, which payout PSBTs
	// name beside each input; absent for a network without payouts by PSBT.
	KeyOrigins map[string]hdwallet.KeyOrigin
}

// Networks with derived addresses, and all watched networks.
var (
	keyNetworks     = []string{"bitcoin", "litecoin", "ethereum", "tron"}
	watchedNetworks = []string{"bitcoin", "litecoin", "ethereum", "tron", "solana"}
)

// DefaultConfirmations are the confirmation policies: Bitcoin 2, Litecoin 6,
// Ethereum 12 (or "finalized"), Tron and Solana follow only solidified /
// finalized data, which is final at 1.
var DefaultConfirmations = map[string]int64{"bitcoin": 2, "litecoin": 6, "ethereum": 12, "tron": 1, "solana": 1}

// DefaultDust is, per network and asset, the amount in base units below
// which a payment is dust: recorded and summarised per request rather than
// signalled one by one (about one US cent or less at 2026 prices).
var DefaultDust = map[string]map[string]int64{
	"bitcoin":  {"BTC": 1000},
	"litecoin": {"LTC": 10_000},
	"ethereum": {"ETH": 10_000_000_000_000, "USDT": 10_000, "USDC": 10_000},
	"tron":     {"TRX": 100_000, "USDT": 10_000},
	"solana":   {"SOL": 100_000},
}

// keyOrigins reads KERNODECK_<NETWORK>_KEY_ORIGIN for the PSBT networks:
// "[d34db33f/84'/2'/0']" (the master key's fingerprint and the account's
// path), checked against the network's account key when there is one. A
// key that does not parse is reported where keys are parsed.
func keyOrigins(p *parser, c Payments) map[string]hdwallet.KeyOrigin {
	out := map[string]hdwallet.KeyOrigin{}
	for _, n := range []string{"bitcoin", "litecoin"} {
		key := "KERNODECK_" + strings.ToUpper(n) + "_KEY_ORIGIN"
		v := p.getenv(key)
		if v == "" {
			continue
		}
		o, err := hdwallet.ParseKeyOrigin(v)
		if err != nil {
			p.fail(key, err)
			continue
		}
		if xpub := c.AccountKeys[n]; xpub != "" {
			if acct, err := hdwallet.ParseAccountKey(hdwallet.Network(c.KeyNetworks[n]), xpub); err == nil {
				if err := acct.CheckOrigin(o); err != nil {
					p.fail(key, fmt.Errorf("%w (KERNODECK_XPUB_%s)", err, strings.ToUpper(n)))
				}
			}
		}
		out[n] = o
	}
	return out
}

// PaymentsFromEnv reads the payments configuration.
func PaymentsFromEnv(getenv func(string) string) (Payments, error) {
	if getenv == nil {
		getenv = Getenv
	}
	p := parser{getenv: getenv}
	c := Payments{
		RateSource:         p.str("KERNODECK_RATES", "kraken"),
		StaticRates:        p.str("KERNODECK_STATIC_RATES", ""),
		KrakenURL:          p.str("KERNODECK_KRAKEN_URL", "https://api.kraken.com"),
		RateMaxAge:         p.dur("KERNODECK_RATE_MAX_AGE", 5*time.Minute),
		Deadline:           p.dur("KERNODECK_INTENT_DEADLINE", 60*time.Minute),
		WatchAfter:         p.dur("KERNODECK_INTENT_WATCH_AFTER", 24*time.Hour),
		SolanaAddress:      p.str("KERNODECK_SOLANA_ADDRESS", ""),
		EthereumChainID:    int64(p.int("KERNODECK_ETHEREUM_CHAIN_ID", 1)),
		EthereumFinality:   p.str("KERNODECK_ETHEREUM_FINALITY", "latest"),
		WatcherPoll:        p.dur("KERNODECK_WATCHER_POLL", 2*time.Second),
		EthereumWSURL:      p.str("KERNODECK_ETHEREUM_WS_URL", ""),
		RateSampleInterval: p.dur("KERNODECK_RATE_SAMPLE_INTERVAL", rates.DefaultSampleInterval),
		ValueTolerance:     rates.DefaultValueTolerance,
		P2PAddrs:           map[string]string{},
		AccountKeys:        map[string]string{},
		KeyNetworks:        map[string]string{},
		NodeURLs:           map[string]string{},
		Confirmations:      map[string]int64{},
		Tokens: map[string]map[string]string{
			// Mainnet contracts by default (Tether and Circle's own).
			"ethereum": {
				"USDT": p.str("KERNODECK_USDT_ETHEREUM_CONTRACT", "0xdAC17F958D2ee523a2206206994597C13D831ec7"),
				"USDC": p.str("KERNODECK_USDC_ETHEREUM_CONTRACT", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"),
			},
			"tron": {"USDT": p.str("KERNODECK_USDT_TRON_CONTRACT", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t")},
		},
	}
	for _, n := range keyNetworks {
		up := strings.ToUpper(n)
		if v := p.str("KERNODECK_XPUB_"+up, ""); v != "" {
			c.AccountKeys[n] = v
		}
		c.KeyNetworks[n] = p.str("KERNODECK_"+up+"_KEY_NETWORK", n)
	}
	c.KeyOrigins = keyOrigins(&p, c)
	for _, n := range watchedNetworks {
		key := "KERNODECK_" + strings.ToUpper(n) + "_NODE_URL"
		if v := p.str(key, ""); v != "" {
			c.NodeURLs[n] = v
			if err := checkURL(key, v, false); err != nil && p.err == nil {
				p.err = err
			}
		}
	}
	if err := checkURL("KERNODECK_ETHEREUM_WS_URL", c.EthereumWSURL, false); err != nil && p.err == nil {
		p.err = err
	}
	for _, n := range []string{"bitcoin", "litecoin"} {
		if v := p.str("KERNODECK_"+strings.ToUpper(n)+"_P2P", ""); v != "" {
			c.P2PAddrs[n] = v
		}
	}
	for k, v := range DefaultConfirmations {
		c.Confirmations[k] = v
	}
	for _, kv := range p.list("KERNODECK_CONFIRMATIONS") {
		k, v, ok := strings.Cut(kv, "=")
		var n int64
		if _, err := fmt.Sscan(v, &n); !ok || err != nil || n < 1 {
			p.fail("KERNODECK_CONFIRMATIONS", fmt.Errorf("want network=count pairs, got %q", kv))
			break
		}
		c.Confirmations[k] = n
	}
	c.Dust = map[string]map[string]int64{}
	for n, assets := range DefaultDust {
		c.Dust[n] = map[string]int64{}
		for a, v := range assets {
			c.Dust[n][a] = v
		}
	}
	for _, kv := range p.list("KERNODECK_DUST") {
		// network/ASSET=base units
		k, v, ok := strings.Cut(kv, "=")
		network, asset, ok2 := strings.Cut(k, "/")
		var n int64
		if _, err := fmt.Sscan(v, &n); !ok || !ok2 || err != nil || n < 0 || c.Dust[network] == nil {
			p.fail("KERNODECK_DUST", fmt.Errorf("want network/ASSET=base units pairs, got %q", kv))
			break
		}
		c.Dust[network][asset] = n
	}
	if v := p.getenv("KERNODECK_VALUE_TOLERANCE"); v != "" {
		t, err := rates.ParseTolerance(v)
		if err != nil {
			p.fail("KERNODECK_VALUE_TOLERANCE", err)
		}
		c.ValueTolerance = t
	}
	if c.RateSampleInterval <= 0 || c.RateSampleInterval > rates.ValueWindow {
		p.fail("KERNODECK_RATE_SAMPLE_INTERVAL", fmt.Errorf("want a positive duration of at most %s (the rate window), got %s",
			rates.ValueWindow, c.RateSampleInterval))
	}
	if c.RateSource != "kraken" && c.RateSource != "static" {
		p.fail("KERNODECK_RATES", fmt.Errorf("want kraken or static, got %q", c.RateSource))
	}
	if c.EthereumFinality != "latest" && c.EthereumFinality != "finalized" {
		p.fail("KERNODECK_ETHEREUM_FINALITY", fmt.Errorf("want latest or finalized, got %q", c.EthereumFinality))
	}
	if p.err != nil {
		return Payments{}, p.err
	}
	return c, nil
}
