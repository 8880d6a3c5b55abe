// Package evm follows an Ethereum node for the chain watcher: native ETH
// transfers and ERC-20 Transfer logs of the configured token contracts (USDT,
// USDC) become chainwatch outputs. It works over go-ethereum's ethclient (a
// node's JSON-RPC) and over ethclient/simulated in tests, through Client.
//
// Payment keys are (network, txid, index), with this index scheme:
//   - a token transfer uses its log index (its position in the block, below
//     2^32 on any real block);
//   - the native value of a transaction uses NativeIndex (2^32), so it can
//     never collide with a log index of the same transaction.
//
// Only what a transaction does at its top level is seen: ETH forwarded by a
// contract (an internal transfer, e.g. a smart-contract wallet or a batched
// exchange withdrawal) leaves no trace in the block or its logs without
// tracing, so it is left to support's manual attribution.
package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Network is the chainwatch network name of Ethereum.
const Network = "ethereum"

// NativeAsset is the asset of native value transfers.
const NativeAsset = "ETH"

// NativeIndex is the payment index of a transaction's native value. Log
// indexes are positions in a block and stay far below it.
const NativeIndex int64 = 1 << 32

// Finality policies for Config.Finality.
const (
	FinalityLatest    = "latest"
	FinalityFinalized = "finalized"
)

// TransferTopic is topic 0 of an ERC-20 (and TRC-20) Transfer log:
// keccak256("Transfer(address,address,uint256)").
var TransferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// Client is the part of ethclient the Chain uses; *ethclient.Client and
// simulated.Client both satisfy it.
type Client interface {
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	BlockByNumber(ctx context.Context, number *big.Int) (*types.Block, error)
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
	ChainID(ctx context.Context) (*big.Int, error)
}

var (
	_ Client           = (*ethclient.Client)(nil)
	_ chainwatch.Chain = (*Chain)(nil)
)

// Config configures a Chain.
type Config struct {
	// Client is the node; when nil, RPCURL is dialled.
	Client Client
	RPCURL string
	// ChainID, when not 0, must be the node's: a mainnet watcher pointed at
	// a test network would otherwise count worthless coins as payments.
	ChainID int64
	// Tokens maps a token contract's address (hex) to its asset ("USDT",
	// "USDC"). Transfer logs of other contracts are ignored.
	Tokens map[string]string
	// Finality is "latest" (default: the watcher counts confirmations) or
	// "finalized" (Tip is the finalized block; use 1 confirmation).
	Finality string
	// Watched reports whether a native transfer to address (EIP-55) may pay
	// an open request. Only such transactions' receipts are fetched, to drop
	// the failed ones: a receipt per value transfer of every block would
	// cost hundreds of calls per block, for nothing. Nil fetches them all.
	// IndexFilter builds it from the watcher's index.
	Watched func(address string) bool
}

// Chain follows an Ethereum node. It implements chainwatch.Chain.
type Chain struct {
	client    Client
	tokens    map[common.Address]string
	tokenList []common.Address
	finalized bool
	watched   func(string) bool
	closer    func()
}

// New checks the configuration (and the node's chain ID when asked) and
// returns the Chain.
func New(ctx context.Context, cfg Config) (*Chain, error) {
	c := &Chain{tokens: map[common.Address]string{}, watched: cfg.Watched}
	switch cfg.Finality {
	case "", FinalityLatest:
	case FinalityFinalized:
		c.finalized = true
	default:
		return nil, fmt.Errorf("ethereum finality %q: want %q or %q", cfg.Finality, FinalityLatest, FinalityFinalized)
	}
	for addr, asset := range cfg.Tokens {
		if !common.IsHexAddress(addr) {
			return nil, fmt.Errorf("ethereum token contract %q (%s): not an address", addr, asset)
		}
		if asset == "" || asset == NativeAsset {
			return nil, fmt.Errorf("ethereum token contract %s: asset %q", addr, asset)
		}
		a := common.HexToAddress(addr)
		c.tokens[a] = asset
		c.tokenList = append(c.tokenList, a)
	}
	c.client = cfg.Client
	if c.client == nil {
		if cfg.RPCURL == "" {
			return nil, errors.New("ethereum: no client and no RPC URL")
		}
		rc, err := ethclient.DialContext(ctx, cfg.RPCURL)
		if err != nil {
			return nil, fmt.Errorf("dial ethereum node: %w", err)
		}
		c.client, c.closer = rc, rc.Close
	}
	if cfg.ChainID != 0 {
		id, err := c.client.ChainID(ctx)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("ethereum chain id: %w", err)
		}
		if id.Cmp(big.NewInt(cfg.ChainID)) != 0 {
			c.Close()
			return nil, fmt.Errorf("ethereum node is on chain %s, want %d", id, cfg.ChainID)
		}
	}
	return c, nil
}

// SetWatched replaces Config.Watched (the watcher's index exists only once
// the watcher is built, after the Chain). Call it before the watcher runs.
func (c *Chain) SetWatched(f func(address string) bool) { c.watched = f }

// IndexFilter is a Config.Watched over a watcher's index: an address is
// watched when the shop ever handed it out, for any asset (ETH sent to a
// USDT request's address is recorded too).
func IndexFilter(x *chainwatch.Index) func(string) bool { return x.Has }

// Close closes the client the Chain dialled itself.
func (c *Chain) Close() {
	if c.closer != nil {
		c.closer()
	}
}

// Network is "ethereum".
func (c *Chain) Network() string { return Network }

// Tip is the latest block's number, or the finalized one's.
func (c *Chain) Tip(ctx context.Context) (int64, error) {
	if !c.finalized {
		n, err := c.client.BlockNumber(ctx)
		if err != nil {
			return 0, fmt.Errorf("block number: %w", err)
		}
		return int64(n), nil
	}
	h, err := c.client.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil {
		return 0, fmt.Errorf("finalized header: %w", err)
	}
	return h.Number.Int64(), nil
}

// BlockHash is the hash of the canonical block at height.
func (c *Chain) BlockHash(ctx context.Context, height int64) (string, error) {
	h, err := c.client.HeaderByNumber(ctx, big.NewInt(height))
	if err != nil {
		return "", fmt.Errorf("header %d: %w", height, err)
	}
	return h.Hash().Hex(), nil
}

// Block returns the block at height with its payments: the native value of
// successful transactions (to watched addresses, when Watched is set) and
// the Transfer logs of the token contracts. Logs are read by block hash, so
// they belong to the very block returned even if the chain moves meanwhile.
func (c *Chain) Block(ctx context.Context, height int64) (chainwatch.Block, error) {
	b, err := c.client.BlockByNumber(ctx, big.NewInt(height))
	if err != nil {
		return chainwatch.Block{}, fmt.Errorf("block %d: %w", height, err)
	}
	hash := b.Hash()
	out := chainwatch.Block{
		Height: b.Number().Int64(),
		Hash:   hash.Hex(),
		Parent: b.ParentHash().Hex(),
		Time:   time.Unix(int64(b.Time()), 0).UTC(),
	}
	for _, tx := range b.Transactions() {
		to := tx.To()
		if to == nil || tx.Value().Sign() <= 0 {
			continue
		}
		addr := to.Hex()
		if c.watched != nil && !c.watched(addr) {
			continue
		}
		// A failed transaction keeps its value: only a receipt tells.
		r, err := c.client.TransactionReceipt(ctx, tx.Hash())
		if err != nil {
			return chainwatch.Block{}, fmt.Errorf("receipt %s: %w", tx.Hash().Hex(), err)
		}
		if r.BlockHash != hash {
			// The receipt is from another block: the chain moved. The
			// watcher rereads after its reorganisation check.
			return chainwatch.Block{}, fmt.Errorf("receipt %s is in block %s, not %s: chain moved", tx.Hash().Hex(), r.BlockHash.Hex(), hash.Hex())
		}
		if r.Status != types.ReceiptStatusSuccessful {
			continue
		}
		out.Outputs = append(out.Outputs, chainwatch.Output{
			TxID: tx.Hash().Hex(), Index: NativeIndex, Address: addr, Asset: NativeAsset,
			Amount: new(big.Int).Set(tx.Value()),
		})
	}
	if len(c.tokenList) == 0 {
		return out, nil
	}
	logs, err := c.client.FilterLogs(ctx, ethereum.FilterQuery{
		BlockHash: &hash,
		Addresses: c.tokenList,
		Topics:    [][]common.Hash{{TransferTopic}},
	})
	if err != nil {
		return chainwatch.Block{}, fmt.Errorf("transfer logs of block %d: %w", height, err)
	}
	for _, l := range logs {
		asset, ok := c.tokens[l.Address]
		if !ok || l.Removed || l.BlockHash != hash {
			continue
		}
		_, to, amount, ok := DecodeTransfer(l)
		if !ok {
			continue
		}
		out.Outputs = append(out.Outputs, chainwatch.Output{
			TxID: l.TxHash.Hex(), Index: int64(l.Index), Address: to.Hex(), Asset: asset, Amount: amount,
		})
	}
	return out, nil
}

// DecodeTransfer decodes an ERC-20 Transfer(address,address,uint256) log: two
// indexed addresses and the amount as data. It refuses anything else with
// the same topic 0 (ERC-721's Transfer indexes a third topic and has no
// data). TRC-20 logs have the same layout, so Tron's watcher reuses it.
func DecodeTransfer(l types.Log) (from, to common.Address, amount *big.Int, ok bool) {
	if len(l.Topics) != 3 || l.Topics[0] != TransferTopic || len(l.Data) != 32 {
		return common.Address{}, common.Address{}, nil, false
	}
	// Indexed addresses are left-padded to 32 bytes; non-zero padding is
	// not an address an ABI encoder produces.
	for _, t := range l.Topics[1:] {
		if [12]byte(t[:12]) != ([12]byte{}) {
			return common.Address{}, common.Address{}, nil, false
		}
	}
	from = common.BytesToAddress(l.Topics[1][12:])
	to = common.BytesToAddress(l.Topics[2][12:])
	return from, to, new(big.Int).SetBytes(l.Data), true
}
