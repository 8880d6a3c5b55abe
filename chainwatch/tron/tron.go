// Package tron follows Tron's solidified blocks through java-tron's HTTP API
// (a full node's /walletsolidity endpoints, or TronGrid) for the generic
// chainwatch.Watcher: TRX transfers (TransferContract) and TRC-20 Transfer
// logs of the configured token contracts (USDT).
//
// Only solidified blocks are read: they are final (irreversible once 19 of
// the 27 super representatives built on them), so the watcher's policy is
// one confirmation and a payment is never seen before it is final.
package tron

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Network is the network's name in intents and payments.
const Network = "tron"

// NativeAsset is TRX, counted in sun (1 TRX = 10^6 sun).
const NativeAsset = "TRX"

// Policy is Tron's confirmation policy: solidified blocks are final.
var Policy = chainwatch.Policy{Confirmations: 1}

// transferTopic is keccak256("Transfer(address,address,uint256)"), topic 0
// of an ERC-20 and TRC-20 Transfer log. java-tron writes topics as bare hex.
const transferTopic = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

// ErrBlockNotFound is returned for a height the node has not solidified.
var ErrBlockNotFound = errors.New("tron: block not solidified yet")

// Chain reads solidified blocks from a java-tron HTTP API.
type Chain struct {
	baseURL string
	client  *http.Client
	apiKey  string
	tokens  map[[20]byte]string // TRC-20 contract -> asset
}

// Config configures a Chain.
type Config struct {
	// URL is the HTTP API's base (a java-tron full node's solidity HTTP
	// port, 8091 by default, or https://api.trongrid.io); the
	// /walletsolidity/... paths are appended.
	// A provider that refuses them (GetBlock answers 405) cannot be used:
	// only solidified blocks are final.
	URL string
	// Tokens maps an asset to its TRC-20 contract, as a T-address or hex
	// ("USDT" -> "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t" on mainnet).
	Tokens map[string]string
	// APIKey is sent as TRON-PRO-API-KEY (TronGrid); empty for own nodes.
	APIKey string
	// Client is the HTTP client (a 30 s timeout by default).
	Client *http.Client
}

// New returns a Chain for cfg.
func New(cfg Config) (*Chain, error) {
	if cfg.URL == "" {
		return nil, errors.New("tron: no API URL")
	}
	c := &Chain{baseURL: strings.TrimRight(cfg.URL, "/"), client: cfg.Client, apiKey: cfg.APIKey,
		tokens: map[[20]byte]string{}}
	if c.client == nil {
		c.client = &http.Client{Timeout: 30 * time.Second}
	}
	for asset, contract := range cfg.Tokens {
		a, err := ParseAddress(contract)
		if err != nil {
			return nil, fmt.Errorf("tron: token %s: %w", asset, err)
		}
		c.tokens[a] = asset
	}
	return c, nil
}

var _ chainwatch.Chain = (*Chain)(nil)

// Network is "tron".
func (c *Chain) Network() string { return Network }

// The HTTP API's JSON, as java-tron prints it without "visible": addresses
// and hashes in hex. Only the fields the watcher reads are declared.
type (
	apiBlock struct {
		BlockID     string `json:"blockID"`
		BlockHeader struct {
			RawData struct {
				Number     int64  `json:"number"`
				ParentHash string `json:"parentHash"`
				Timestamp  int64  `json:"timestamp"` // milliseconds
			} `json:"raw_data"`
		} `json:"block_header"`
		Transactions []apiTransaction `json:"transactions"`
	}
	apiTransaction struct {
		TxID string `json:"txID"`
		Ret  []struct {
			ContractRet string `json:"contractRet"`
		} `json:"ret"`
		RawData struct {
			Contract []struct {
				Type      string `json:"type"`
				Parameter struct {
					Value json.RawMessage `json:"value"`
				} `json:"parameter"`
			} `json:"contract"`
		} `json:"raw_data"`
	}
	apiTransfer struct {
		Amount       int64  `json:"amount"` // sun
		OwnerAddress string `json:"owner_address"`
		ToAddress    string `json:"to_address"`
	}
	apiTxInfo struct {
		ID string `json:"id"`
		// Result is "FAILED" for a failed transaction; absent (SUCESS, the
		// default) otherwise.
		Result  string `json:"result"`
		Receipt struct {
			// Result is the contract execution's outcome ("SUCCESS",
			// "REVERT", "OUT_OF_ENERGY", ...); absent for plain transfers.
			Result string `json:"result"`
		} `json:"receipt"`
		Log []apiLog `json:"log"`
	}
	apiLog struct {
		Address string   `json:"address"` // 20-byte contract, no 41 prefix
		Topics  []string `json:"topics"`
		Data    string   `json:"data"`
	}
)

// post calls one API path with a JSON body and decodes the answer into out.
func (c *Chain) post(ctx context.Context, path string, body any, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("TRON-PRO-API-KEY", c.apiKey)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("tron %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("tron %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("tron %s: HTTP %d: %.200s", path, resp.StatusCode, data)
	}
	// java-tron answers errors with 200 and {"Error": "..."}.
	var apiErr struct {
		Error string `json:"Error"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && json.Unmarshal(data, &apiErr) == nil && apiErr.Error != "" {
		return fmt.Errorf("tron %s: %s", path, apiErr.Error)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("tron %s: decode: %w", path, err)
	}
	return nil
}

// Tip is the newest solidified block's number.
func (c *Chain) Tip(ctx context.Context) (int64, error) {
	var b apiBlock
	if err := c.post(ctx, "/walletsolidity/getnowblock", struct{}{}, &b); err != nil {
		return 0, err
	}
	if b.BlockID == "" {
		return 0, errors.New("tron: getnowblock answered no block")
	}
	return b.BlockHeader.RawData.Number, nil
}

func (c *Chain) block(ctx context.Context, height int64) (apiBlock, error) {
	var b apiBlock
	if err := c.post(ctx, "/walletsolidity/getblockbynum", map[string]int64{"num": height}, &b); err != nil {
		return b, err
	}
	// A height above the solidified one is answered with {}.
	if b.BlockID == "" {
		return b, fmt.Errorf("block %d: %w", height, ErrBlockNotFound)
	}
	if b.BlockHeader.RawData.Number != height {
		return b, fmt.Errorf("tron: asked block %d, got %d", height, b.BlockHeader.RawData.Number)
	}
	return b, nil
}

// BlockHash is the solidified block's ID at height.
func (c *Chain) BlockHash(ctx context.Context, height int64) (string, error) {
	b, err := c.block(ctx, height)
	if err != nil {
		return "", err
	}
	return b.BlockID, nil
}

// Block returns the solidified block at height with its successful TRX
// transfers and the TRC-20 Transfer logs of the configured tokens.
func (c *Chain) Block(ctx context.Context, height int64) (chainwatch.Block, error) {
	b, err := c.block(ctx, height)
	if err != nil {
		return chainwatch.Block{}, err
	}
	out := chainwatch.Block{
		Height: height,
		Hash:   b.BlockID,
		Parent: b.BlockHeader.RawData.ParentHash,
		Time:   time.UnixMilli(b.BlockHeader.RawData.Timestamp).UTC(),
	}
	for _, tx := range b.Transactions {
		for i, ct := range tx.RawData.Contract {
			if ct.Type != "TransferContract" {
				continue
			}
			// ret[i] is contract i's outcome; only SUCCESS moved the funds.
			if i >= len(tx.Ret) || tx.Ret[i].ContractRet != "SUCCESS" {
				continue
			}
			var v apiTransfer
			if err := json.Unmarshal(ct.Parameter.Value, &v); err != nil {
				return chainwatch.Block{}, fmt.Errorf("tron: block %d tx %s: transfer: %w", height, tx.TxID, err)
			}
			if v.Amount <= 0 {
				// No successful transfer moves zero or negative sun: not a
				// payment, whatever the node says (found by FuzzBlock).
				continue
			}
			to, err := hexToAddress(v.ToAddress)
			if err != nil {
				return chainwatch.Block{}, fmt.Errorf("tron: block %d tx %s: %w", height, tx.TxID, err)
			}
			// A payment is named by its transaction: a transfer without a
			// txID is garbage from the node (found by FuzzBlock).
			if tx.TxID == "" {
				return chainwatch.Block{}, fmt.Errorf("tron: block %d: transfer without txID", height)
			}
			out.Outputs = append(out.Outputs, chainwatch.Output{
				TxID: tx.TxID, Index: int64(i), Address: to, Asset: NativeAsset, Amount: big.NewInt(v.Amount),
			})
		}
	}
	// Token transfers are only in the transactions' receipts; a block
	// without transactions has none, and without tokens nothing is asked.
	if len(c.tokens) == 0 || len(b.Transactions) == 0 {
		return out, nil
	}
	var raw json.RawMessage
	if err := c.post(ctx, "/walletsolidity/gettransactioninfobyblocknum", map[string]int64{"num": height}, &raw); err != nil {
		return chainwatch.Block{}, err
	}
	// Every transaction of a solidified block has its receipt; fewer (or
	// the {} an unknown block gets) means the node is not ready, and
	// skipping the block would lose token payments for good: fail, the
	// watcher retries the block next step.
	var infos []apiTxInfo
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return chainwatch.Block{}, fmt.Errorf("tron: block %d: no receipts: %w", height, ErrBlockNotFound)
	}
	if err := json.Unmarshal(raw, &infos); err != nil {
		return chainwatch.Block{}, fmt.Errorf("tron: block %d receipts: %w", height, err)
	}
	if len(infos) < len(b.Transactions) {
		return chainwatch.Block{}, fmt.Errorf("tron: block %d: %d receipts for %d transactions", height, len(infos), len(b.Transactions))
	}
	for _, info := range infos {
		if info.Result == "FAILED" || (info.Receipt.Result != "" && info.Receipt.Result != "SUCCESS") {
			continue
		}
		for li, l := range info.Log {
			contract, to, amount, ok := decodeTransferLog(l)
			if !ok {
				continue
			}
			asset, watched := c.tokens[contract]
			if !watched {
				continue
			}
			if info.ID == "" {
				return chainwatch.Block{}, fmt.Errorf("tron: block %d: token transfer in a receipt without id", height)
			}
			// The log's position in its transaction is its index: Tron
			// numbers no logs, and one transaction may carry several
			// Transfer logs (a transfer through a router).
			out.Outputs = append(out.Outputs, chainwatch.Output{
				TxID: info.ID, Index: int64(li), Address: Address(to), Asset: asset, Amount: amount,
			})
		}
	}
	return out, nil
}

// decodeTransferLog reads a TRC-20 Transfer(address,address,uint256) log as
// java-tron prints it: the contract as 20 bytes of hex (no 41 prefix),
// topics and data as bare hex. The layout is ERC-20's: from and to indexed
// in topics 1 and 2, left-padded to 32 bytes, the amount as the 32-byte
// data. Anything else with the same topic 0 (ERC-721's Transfer has a
// third indexed topic and no data) is refused.
func decodeTransferLog(l apiLog) (contract, to [20]byte, amount *big.Int, ok bool) {
	if len(l.Topics) != 3 || strings.ToLower(strings.TrimPrefix(l.Topics[0], "0x")) != transferTopic {
		return contract, to, nil, false
	}
	c, err := ParseAddress(l.Address)
	if err != nil {
		return contract, to, nil, false
	}
	toWord, err := word(l.Topics[2])
	if err != nil {
		return contract, to, nil, false
	}
	fromWord, err := word(l.Topics[1])
	if err != nil {
		return contract, to, nil, false
	}
	data, err := word(l.Data)
	if err != nil {
		return contract, to, nil, false
	}
	// An address word with non-zero padding is not what an ABI encoder
	// writes; reading its low 20 bytes could credit the wrong account.
	if !bytes.Equal(toWord[:12], make([]byte, 12)) || !bytes.Equal(fromWord[:12], make([]byte, 12)) {
		return contract, to, nil, false
	}
	copy(to[:], toWord[12:])
	return c, to, new(big.Int).SetBytes(data), true
}

// word decodes one 32-byte ABI word written as hex.
func word(h string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(h, "0x"))
	if err != nil {
		return nil, err
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("%d bytes, want 32", len(b))
	}
	return b, nil
}
