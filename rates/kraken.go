package rates

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// KrakenSourceName is the Source of the rates Kraken returns.
const KrakenSourceName = "kraken"

// DefaultKrakenBaseURL is Kraken's public REST API.
const DefaultKrakenBaseURL = "https://api.kraken.com"

// defaultKrakenTimeout bounds a ticker call when no client is given: a
// payment request waits on it, and a slow exchange must fail fast.
const defaultKrakenTimeout = 10 * time.Second

// maxKrakenBody bounds what is read from the exchange; a ticker for one pair
// is well under a kilobyte.
const maxKrakenBody = 1 << 20

// krakenPairs maps the shop's assets to Kraken's USD pairs. The pair is per
// asset, not per network: USDT on Ethereum and on Tron are the same dollar.
var krakenPairs = map[string]string{
	"BTC":  "XBTUSD",
	"ETH":  "ETHUSD",
	"LTC":  "LTCUSD",
	"SOL":  "SOLUSD",
	"TRX":  "TRXUSD",
	"USDT": "USDTZUSD",
	"USDC": "USDCUSD",
}

// Kraken reads the last trade price from Kraken's public Ticker endpoint
// (GET /0/public/Ticker?pair=XBTUSD). It needs no API key. The zero value
// is ready to use.
type Kraken struct {
	// BaseURL is the API root; "" means DefaultKrakenBaseURL. Tests point it
	// at a local server.
	BaseURL string
	// Client makes the requests; nil means a client with a 10 s timeout.
	Client *http.Client
	// Now dates the rates; nil means time.Now. The ticker carries no time of
	// its own, so a rate is dated when the answer was received.
	Now func() time.Time
}

// krakenTicker is the part of a Ticker answer that is used. Prices are kept
// as strings so that they never pass through float64.
type krakenTicker struct {
	Error  []string `json:"error"`
	Result map[string]struct {
		// C is the last trade closed: [price, lot volume].
		C []string `json:"c"`
	} `json:"result"`
}

// Rate returns the USD price of asset from its last trade on Kraken.
func (k *Kraken) Rate(ctx context.Context, asset string) (Rate, error) {
	asset = normalizeAsset(asset)
	pair, ok := krakenPairs[asset]
	if !ok {
		return Rate{}, fmt.Errorf("%w: no Kraken pair for %q", ErrUnknownAsset, asset)
	}
	base := k.BaseURL
	if base == "" {
		base = DefaultKrakenBaseURL
	}
	u := strings.TrimSuffix(base, "/") + "/0/public/Ticker?pair=" + url.QueryEscape(pair)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Rate{}, fmt.Errorf("rates: kraken %s: %w", pair, err)
	}
	req.Header.Set("Accept", "application/json")
	client := k.Client
	if client == nil {
		client = &http.Client{Timeout: defaultKrakenTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return Rate{}, fmt.Errorf("rates: kraken %s: %w", pair, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKrakenBody))
	if err != nil {
		return Rate{}, fmt.Errorf("rates: kraken %s: reading answer: %w", pair, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Rate{}, fmt.Errorf("rates: kraken %s: HTTP %s", pair, resp.Status)
	}
	var t krakenTicker
	if err := json.Unmarshal(body, &t); err != nil {
		return Rate{}, fmt.Errorf("rates: kraken %s: decoding answer: %w", pair, err)
	}
	if len(t.Error) > 0 {
		return Rate{}, fmt.Errorf("rates: kraken %s: %s", pair, strings.Join(t.Error, "; "))
	}
	// Kraken answers under its own name for the pair (XBTUSD comes back as
	// XXBTZUSD), so take the only entry rather than look the name up.
	if len(t.Result) != 1 {
		return Rate{}, fmt.Errorf("rates: kraken %s: want one result, got %d", pair, len(t.Result))
	}
	var last []string
	for _, v := range t.Result {
		last = v.C
	}
	if len(last) == 0 {
		return Rate{}, fmt.Errorf("rates: kraken %s: no last trade price", pair)
	}
	price, err := decimal.NewFromString(last[0])
	if err != nil {
		return Rate{}, fmt.Errorf("rates: kraken %s: last trade price %q: %w", pair, last[0], err)
	}
	if price.Sign() <= 0 {
		return Rate{}, fmt.Errorf("rates: kraken %s: last trade price %s is not positive", pair, price)
	}
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	return Rate{Asset: asset, USDPerUnit: price, Source: KrakenSourceName, At: now()}, nil
}
