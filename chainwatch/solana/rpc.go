package solana

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync/atomic"
	"time"
)

// rpcClient is a minimal Solana JSON-RPC 2.0 client over net/http: the four
// methods the watcher needs, nothing else.
type rpcClient struct {
	url    string
	client *http.Client
	id     atomic.Int64
}

// RPCError is an error answered by the node.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("solana rpc %d: %s", e.Code, e.Message) }

func (c *rpcClient) call(ctx context.Context, method string, params []any, out any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("solana %s: %w", method, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("solana %s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("solana %s: HTTP %d: %.200s", method, resp.StatusCode, data)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return fmt.Errorf("solana %s: decode: %w", method, err)
	}
	if env.Error != nil {
		return fmt.Errorf("solana %s: %w", method, env.Error)
	}
	dec = json.NewDecoder(bytes.NewReader(env.Result))
	// Lamport balances are u64: read them as exact numbers, never floats.
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("solana %s: decode result: %w", method, err)
	}
	return nil
}

// signatureInfo is one entry of getSignaturesForAddress.
type signatureInfo struct {
	Signature          string          `json:"signature"`
	Slot               int64           `json:"slot"`
	Err                json.RawMessage `json:"err"`
	BlockTime          *int64          `json:"blockTime"`
	ConfirmationStatus string          `json:"confirmationStatus"`
}

func (s signatureInfo) failed() bool { return len(s.Err) > 0 && string(s.Err) != "null" }

// maxSignatures is getSignaturesForAddress's page limit.
const maxSignatures = 1000

// signaturesForAddress returns the finalized signatures involving address
// newer than until ("" for all), newest first, following the pages.
func (c *rpcClient) signaturesForAddress(ctx context.Context, address, until string) ([]signatureInfo, error) {
	var all []signatureInfo
	before := ""
	for {
		cfg := map[string]any{"commitment": "finalized", "limit": maxSignatures}
		if until != "" {
			cfg["until"] = until
		}
		if before != "" {
			cfg["before"] = before
		}
		var page []signatureInfo
		if err := c.call(ctx, "getSignaturesForAddress", []any{address, cfg}, &page); err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < maxSignatures {
			return all, nil
		}
		before = page[len(page)-1].Signature
	}
}

// transaction is what the watcher reads of getTransaction (jsonParsed).
type transaction struct {
	Slot      int64  `json:"slot"`
	BlockTime *int64 `json:"blockTime"`
	Meta      *struct {
		Err          json.RawMessage `json:"err"`
		PreBalances  []json.Number   `json:"preBalances"`
		PostBalances []json.Number   `json:"postBalances"`
	} `json:"meta"`
	Transaction struct {
		Message struct {
			// jsonParsed lists every account the transaction loaded, those
			// of address lookup tables included, in balance order.
			AccountKeys []struct {
				Pubkey string `json:"pubkey"`
			} `json:"accountKeys"`
		} `json:"message"`
		Signatures []string `json:"signatures"`
	} `json:"transaction"`
}

// getTransaction returns a finalized transaction, or nil if the node does
// not have it (yet).
func (c *rpcClient) getTransaction(ctx context.Context, sig string) (*transaction, error) {
	var tx *transaction
	err := c.call(ctx, "getTransaction", []any{sig, map[string]any{
		"encoding": "jsonParsed", "commitment": "finalized", "maxSupportedTransactionVersion": 0,
	}}, &tx)
	return tx, err
}

// received is the lamports address gained in tx (its balance after minus
// before), or nil if address is not one of its accounts.
func (tx *transaction) received(address string) (*big.Int, error) {
	if tx.Meta == nil {
		return nil, fmt.Errorf("transaction without meta")
	}
	for i, k := range tx.Transaction.Message.AccountKeys {
		if k.Pubkey != address {
			continue
		}
		if i >= len(tx.Meta.PreBalances) || i >= len(tx.Meta.PostBalances) {
			return nil, fmt.Errorf("account %d has no balance", i)
		}
		pre, ok1 := new(big.Int).SetString(tx.Meta.PreBalances[i].String(), 10)
		post, ok2 := new(big.Int).SetString(tx.Meta.PostBalances[i].String(), 10)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("account %d: bad balances %s, %s", i, tx.Meta.PreBalances[i], tx.Meta.PostBalances[i])
		}
		return post.Sub(post, pre), nil
	}
	return nil, nil
}

func (tx *transaction) failed() bool {
	return tx.Meta == nil || (len(tx.Meta.Err) > 0 && string(tx.Meta.Err) != "null")
}

// finalizedSlot is the newest finalized slot.
func (c *rpcClient) finalizedSlot(ctx context.Context) (int64, error) {
	var slot int64
	err := c.call(ctx, "getSlot", []any{map[string]any{"commitment": "finalized"}}, &slot)
	return slot, err
}

// blockTime is the estimated production time of slot's block; ok is false
// when the node has none for it (a skipped or purged slot: null).
func (c *rpcClient) blockTime(ctx context.Context, slot int64) (at time.Time, ok bool, err error) {
	var unix *int64
	if err := c.call(ctx, "getBlockTime", []any{slot}, &unix); err != nil {
		return time.Time{}, false, err
	}
	if unix == nil {
		return time.Time{}, false, nil
	}
	return time.Unix(*unix, 0).UTC(), true, nil
}
