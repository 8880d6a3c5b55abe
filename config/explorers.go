package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/kernodeck/kernodeck/domain"
)

// ExplorerNetworks are the networks whose block explorer the support
// console can link to, each read from KERNODECK_EXPLORER_URL_<NETWORK>.
var ExplorerNetworks = []string{domain.NetworkBitcoin, domain.NetworkEthereum, domain.NetworkTron,
	domain.NetworkSolana, domain.NetworkLitecoin}

// ExplorersFromEnv reads the support console's block explorer URL templates
// per network (KERNODECK_EXPLORER_URL_BITCOIN, ..._ETHEREUM, ..._TRON,
// ..._SOLANA, ..._LITECOIN): an http(s) URL where "{txid}" stands for the
// transaction id, e.g. https://mempool.space/tx/{txid}. None is set by
// default (development chains are on no public explorer): a network
// without one gets no link.
func ExplorersFromEnv(getenv func(string) string) (map[string]string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	out := map[string]string{}
	for _, n := range ExplorerNetworks {
		key := "KERNODECK_EXPLORER_URL_" + strings.ToUpper(n)
		v := strings.TrimSpace(getenv(key))
		if v == "" {
			continue
		}
		u, err := url.Parse(strings.ReplaceAll(v, "{txid}", "x"))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.Contains(v, "{txid}") {
			return nil, fmt.Errorf("%s: an http(s) URL with {txid} where the transaction id goes, e.g. https://mempool.space/tx/{txid}", key)
		}
		out[n] = v
	}
	return out, nil
}
