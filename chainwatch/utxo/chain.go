// Package utxo follows a Bitcoin Core-compatible node (Bitcoin Core, btcd,
// Litecoin Core) over JSON-RPC for the chain watcher: block heights, hashes,
// and every transaction output that pays an address.
package utxo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/btcsuite/btcd/btcjson"
	"github.com/btcsuite/btcd/rpcclient"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Config says which node to follow and what it carries.
type Config struct {
	// Host is the node's RPC endpoint: "host:port" or "http://host:port".
	Host string
	User string
	Pass string
	// CookiePath is the node's .cookie file, used when User and Pass are
	// empty (Bitcoin Core's default authentication).
	CookiePath string
	// Network is the watcher's network name: "bitcoin" or "litecoin".
	Network string
	// Asset is the native asset ("BTC" for bitcoin, "LTC" for litecoin by
	// default).
	Asset string
	// Timeout bounds each RPC call (30 s by default). rpcclient has none
	// of its own, and the watcher's context lives as long as the process.
	Timeout time.Duration
}

// Chain is a chainwatch.Chain over a node's JSON-RPC.
type Chain struct {
	cfg  Config
	conn rpcclient.ConnConfig

	mu  sync.Mutex
	rpc *rpcclient.Client
}

var _ chainwatch.Chain = (*Chain)(nil)

// defaultAssets are the native assets of the networks this package follows.
var defaultAssets = map[string]string{"bitcoin": "BTC", "litecoin": "LTC"}

// New connects to the node (lazily: HTTP POST mode opens a connection per
// request, so a node that restarts needs no reconnection logic here).
func New(cfg Config) (*Chain, error) {
	if _, ok := defaultAssets[cfg.Network]; !ok {
		return nil, fmt.Errorf("utxo: unsupported network %q (bitcoin or litecoin)", cfg.Network)
	}
	if cfg.Asset == "" {
		cfg.Asset = defaultAssets[cfg.Network]
	}
	host := cfg.Host
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil {
			return nil, fmt.Errorf("utxo: node URL: %w", err)
		}
		if u.Scheme != "http" {
			// rpcclient's TLS needs the node's certificate; nodes here are
			// reached over loopback or a tunnel.
			return nil, fmt.Errorf("utxo: node URL scheme %q not supported (http only)", u.Scheme)
		}
		if u.User != nil && cfg.User == "" {
			cfg.User = u.User.Username()
			cfg.Pass, _ = u.User.Password()
		}
		host = u.Host + strings.TrimRight(u.Path, "/")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	c := &Chain{cfg: cfg, conn: rpcclient.ConnConfig{
		Host:         host,
		User:         cfg.User,
		Pass:         cfg.Pass,
		CookiePath:   cfg.CookiePath,
		HTTPPostMode: true,
		DisableTLS:   true,
	}}
	var err error
	if c.rpc, err = c.newClient(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Chain) newClient() (*rpcclient.Client, error) {
	conn := c.conn // rpcclient keeps the pointer and caches cookie state in it
	rpc, err := rpcclient.New(&conn, nil)
	if err != nil {
		return nil, fmt.Errorf("utxo: rpc client: %w", err)
	}
	return rpc, nil
}

// Close releases the RPC client.
func (c *Chain) Close() {
	c.client().Shutdown()
}

// RPC is the underlying client, for callers that need other node calls
// (tests mine blocks and broadcast with it).
func (c *Chain) RPC() *rpcclient.Client { return c.client() }

func (c *Chain) client() *rpcclient.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rpc
}

// replace swaps in a fresh client after a call on old was abandoned: in
// HTTP POST mode rpcclient sends one request at a time, so every later call
// would queue behind the hung one. The hung request is left to its
// connection; old's queued requests fail with a shutdown error.
func (c *Chain) replace(old *rpcclient.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rpc != old {
		return // another caller already replaced it
	}
	fresh, err := c.newClient()
	if err != nil {
		return // keep the old one; the next call tries again
	}
	c.rpc = fresh
	old.Shutdown()
}

// Asset is the native asset followed ("BTC", "LTC").
func (c *Chain) Asset() string { return c.cfg.Asset }

// Network is the configured network name.
func (c *Chain) Network() string { return c.cfg.Network }

// Tip is the node's best height (getblockcount). The confirmation policy is
// applied by the watcher, so the tip itself is not held back.
func (c *Chain) Tip(ctx context.Context) (int64, error) {
	n, err := call(ctx, c, func(r *rpcclient.Client) func() (int64, error) {
		return r.GetBlockCountAsync().Receive
	})
	if err != nil {
		return 0, fmt.Errorf("%s getblockcount: %w", c.cfg.Network, err)
	}
	return n, nil
}

// BlockHash is the hash of the best chain's block at height (getblockhash).
func (c *Chain) BlockHash(ctx context.Context, height int64) (string, error) {
	h, err := call(ctx, c, func(r *rpcclient.Client) func() (string, error) {
		f := r.GetBlockHashAsync(height)
		return func() (string, error) {
			h, err := f.Receive()
			if err != nil {
				return "", err
			}
			return h.String(), nil
		}
	})
	if err != nil {
		return "", fmt.Errorf("%s getblockhash %d: %w", c.cfg.Network, height, err)
	}
	return h, nil
}

// Block returns the block at height with every output that pays an address.
func (c *Chain) Block(ctx context.Context, height int64) (chainwatch.Block, error) {
	hash, err := c.BlockHash(ctx, height)
	if err != nil {
		return chainwatch.Block{}, err
	}
	raw, err := c.rawRequest(ctx, "getblock", hash, 2)
	if err != nil {
		return chainwatch.Block{}, fmt.Errorf("%s getblock %s: %w", c.cfg.Network, hash, err)
	}
	b, err := DecodeBlock(raw, c.cfg.Asset)
	if err != nil {
		return chainwatch.Block{}, fmt.Errorf("%s block %d: %w", c.cfg.Network, height, err)
	}
	if b.Height != height || b.Hash != hash {
		// The node answered for another block than asked: never record it
		// under this height.
		return chainwatch.Block{}, fmt.Errorf("%s block %d: node returned %d/%s for %s", c.cfg.Network, height, b.Height, b.Hash, hash)
	}
	return b, nil
}

// rawRequest sends a JSON-RPC call the typed client does not model the way
// both node families answer it.
func (c *Chain) rawRequest(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	ps := make([]json.RawMessage, len(params))
	for i, p := range params {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		ps[i] = b
	}
	return call(ctx, c, func(r *rpcclient.Client) func() (json.RawMessage, error) {
		return r.RawRequestAsync(method, ps).Receive
	})
}

// call sends one request (send issues it and returns its future's Receive)
// and waits at most the configured timeout, or until ctx ends. An abandoned
// call replaces the client so that the next ones are not stuck behind it.
func call[T any](ctx context.Context, c *Chain, send func(*rpcclient.Client) func() (T, error)) (T, error) {
	rpc := c.client()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	v, err := await(ctx, send(rpc))
	if err != nil && ctx.Err() != nil {
		c.replace(rpc)
	}
	return v, err
}

// await waits for an rpcclient future, or gives up when ctx ends: rpcclient
// takes no context and its HTTP client has no timeout, so a stuck node must
// not hold the watcher. The abandoned request finishes (or fails) in the
// background.
func await[T any](ctx context.Context, receive func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := receive()
		ch <- result{v, err}
	}()
	select {
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	case r := <-ch:
		return r.v, r.err
	}
}

// verboseBlock is getblock's answer at verbosity 2. Bitcoin Core and
// Litecoin Core put the decoded transactions under "tx"; btcd puts them
// under "rawtx" (and leaves "tx" out).
type verboseBlock struct {
	Hash     string          `json:"hash"`
	Height   int64           `json:"height"`
	Previous string          `json:"previousblockhash"`
	Time     int64           `json:"time"`
	Tx       json.RawMessage `json:"tx"`
	RawTx    []verboseTx     `json:"rawtx"`
}

type verboseTx struct {
	TxID string          `json:"txid"`
	Vout []verboseOutput `json:"vout"`
}

type verboseOutput struct {
	// Value is kept as the node's literal text: amounts are converted to
	// base units exactly, never through float64.
	Value        json.Number `json:"value"`
	N            int64       `json:"n"`
	IsMWEB       bool        `json:"ismweb"`
	ScriptPubKey struct {
		Address   string   `json:"address"`
		Addresses []string `json:"addresses"`
	} `json:"scriptPubKey"`
}

// address is the single address an output pays, "" if none (OP_RETURN,
// bare multisig, non-standard). Newer nodes give "address", older ones
// (Litecoin Core 0.21) only "addresses"; btcd gives both.
func (o verboseOutput) address() string {
	if o.ScriptPubKey.Address != "" {
		return o.ScriptPubKey.Address
	}
	if len(o.ScriptPubKey.Addresses) == 1 {
		return o.ScriptPubKey.Addresses[0]
	}
	return ""
}

// DecodeBlock turns getblock's verbosity-2 JSON (the RPC result, either node
// family's shape) into a chainwatch.Block with every output that pays an
// address, in asset.
func DecodeBlock(raw []byte, asset string) (chainwatch.Block, error) {
	var vb verboseBlock
	if err := json.Unmarshal(raw, &vb); err != nil {
		return chainwatch.Block{}, fmt.Errorf("decode getblock: %w", err)
	}
	if vb.Hash == "" {
		return chainwatch.Block{}, errors.New("decode getblock: no block hash")
	}
	txs := vb.RawTx
	if len(txs) == 0 && len(vb.Tx) > 0 && string(vb.Tx) != "null" {
		if err := json.Unmarshal(vb.Tx, &txs); err != nil {
			// Transaction ids only: the node ignored verbosity 2.
			return chainwatch.Block{}, fmt.Errorf("decode getblock %s transactions (verbosity 2 needed): %w", vb.Hash, err)
		}
	}
	b := chainwatch.Block{
		Height: vb.Height,
		Hash:   vb.Hash,
		Parent: vb.Previous,
		Time:   time.Unix(vb.Time, 0).UTC(),
	}
	for _, tx := range txs {
		// An output must be named by its transaction and index: a block
		// without them is garbage from the node, never an anonymous payment.
		if tx.TxID == "" && len(tx.Vout) > 0 {
			return chainwatch.Block{}, fmt.Errorf("decode getblock %s: transaction without txid", vb.Hash)
		}
		for _, o := range tx.Vout {
			if o.N < 0 {
				return chainwatch.Block{}, fmt.Errorf("decode getblock %s: output %s:%d: negative index", vb.Hash, tx.TxID, o.N)
			}
			// MWEB outputs hide their amount and address: nothing to match.
			if o.IsMWEB {
				continue
			}
			addr := o.address()
			if addr == "" {
				continue
			}
			amount, err := ParseAmount(o.Value)
			if err != nil {
				return chainwatch.Block{}, fmt.Errorf("output %s:%d: %w", tx.TxID, o.N, err)
			}
			b.Outputs = append(b.Outputs, chainwatch.Output{
				TxID: tx.TxID, Index: o.N, Address: addr, Asset: asset, Amount: amount,
			})
		}
	}
	return b, nil
}

// coin is the number of base units (satoshi, litoshi) in one coin.
var coin = big.NewRat(100_000_000, 1)

// ParseAmount converts a node's JSON amount in coins to base units exactly.
// Bitcoin and Litecoin Core print fixed-point decimals ("0.00012345"); btcd
// prints Go float64 text, which uses an exponent for small values ("1e-06").
// Both are parsed as exact decimals; a value that is not a whole number of
// base units, or is negative, is an error rather than a rounded amount.
func ParseAmount(n json.Number) (*big.Int, error) {
	s := string(n)
	// Bounds the work big.Rat does on the exponent; real amounts are short.
	if s == "" || len(s) > 40 {
		return nil, fmt.Errorf("amount %q: not a coin amount", s)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 && len(strings.TrimLeft(s[i+1:], "+-")) > 2 {
		// Float text of a real amount has a one- or two-digit exponent;
		// a huge one would make big.Rat compute a huge power of ten.
		return nil, fmt.Errorf("amount %q: exponent out of range", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("amount %q: not a number", s)
	}
	r.Mul(r, coin)
	if !r.IsInt() {
		return nil, fmt.Errorf("amount %q: not a whole number of base units", s)
	}
	if r.Sign() < 0 {
		return nil, fmt.Errorf("amount %q: negative", s)
	}
	return new(big.Int).Set(r.Num()), nil
}

// TxState says whether the node still has txid in its mempool or in a
// block (getrawtransaction, verbose: btcd has no getmempoolentry). Without
// -txindex a mined transaction looks gone to the node until the watcher
// reads its block (a mempool payment may then revert and be seen again):
// run the nodes with -txindex.
func (c *Chain) TxState(ctx context.Context, txid string) (chainwatch.TxState, error) {
	raw, err := c.rawRequest(ctx, "getrawtransaction", txid, 1)
	if isNotFound(err) {
		return chainwatch.TxGone, nil
	}
	if err != nil {
		return 0, err
	}
	var tx struct {
		BlockHash string `json:"blockhash"`
	}
	if err := json.Unmarshal(raw, &tx); err != nil {
		return 0, fmt.Errorf("getrawtransaction %s: %w", txid, err)
	}
	if tx.BlockHash == "" {
		return chainwatch.TxPending, nil
	}
	return chainwatch.TxMined, nil
}

var _ chainwatch.Mempool = (*Chain)(nil)

// Mempool lists the node's mempool transactions with the outputs that pay
// an address and the outpoints they spend (getrawmempool, then
// getrawtransaction each: btcd has no verbose mempool listing with
// outputs). A transaction mined or dropped meanwhile is skipped.
func (c *Chain) Mempool(ctx context.Context) ([]chainwatch.MempoolTx, error) {
	raw, err := c.rawRequest(ctx, "getrawmempool", false)
	if err != nil {
		return nil, fmt.Errorf("%s getrawmempool: %w", c.cfg.Network, err)
	}
	var txids []string
	if err := json.Unmarshal(raw, &txids); err != nil {
		return nil, fmt.Errorf("%s getrawmempool: %w", c.cfg.Network, err)
	}
	var out []chainwatch.MempoolTx
	for _, txid := range txids {
		raw, err := c.rawRequest(ctx, "getrawtransaction", txid, 1)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s getrawtransaction %s: %w", c.cfg.Network, txid, err)
		}
		tx, err := decodeMempoolTx(raw, c.cfg.Asset)
		if err != nil {
			return nil, fmt.Errorf("%s transaction %s: %w", c.cfg.Network, txid, err)
		}
		out = append(out, tx)
	}
	return out, nil
}

// decodeMempoolTx reads getrawtransaction's verbose answer.
func decodeMempoolTx(raw []byte, asset string) (chainwatch.MempoolTx, error) {
	var tx struct {
		verboseTx
		Vin []struct {
			TxID string `json:"txid"`
			Vout uint32 `json:"vout"`
		} `json:"vin"`
	}
	if err := json.Unmarshal(raw, &tx); err != nil {
		return chainwatch.MempoolTx{}, err
	}
	out := chainwatch.MempoolTx{TxID: tx.TxID}
	for _, o := range tx.Vout {
		addr := o.address()
		if o.IsMWEB || addr == "" || o.N < 0 {
			continue
		}
		amount, err := ParseAmount(o.Value)
		if err != nil {
			return chainwatch.MempoolTx{}, fmt.Errorf("output %d: %w", o.N, err)
		}
		out.Outputs = append(out.Outputs, chainwatch.Output{TxID: tx.TxID, Index: o.N, Address: addr, Asset: asset, Amount: amount})
	}
	for _, in := range tx.Vin {
		if in.TxID != "" { // a coinbase spends nothing
			out.Spends = append(out.Spends, fmt.Sprintf("%s:%d", in.TxID, in.Vout))
		}
	}
	return out, nil
}

// isNotFound: RPC_INVALID_ADDRESS_OR_KEY (-5), "not in mempool" / "no such
// transaction" on Core and btcd.
func isNotFound(err error) bool {
	var re *btcjson.RPCError
	if errors.As(err, &re) {
		return re.Code == btcjson.ErrRPCInvalidAddressOrKey || re.Code == btcjson.ErrRPCNoTxInfo
	}
	return err != nil && (strings.Contains(err.Error(), "-5:") || strings.Contains(err.Error(), "not in mempool") ||
		strings.Contains(err.Error(), "No such mempool"))
}
