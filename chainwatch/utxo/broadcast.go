package utxo

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcjson"
	"github.com/btcsuite/btcd/wire"
)

// Payout transactions go out through the watcher of their network
// (chainwatch.Broadcaster), the one process holding the node's credentials.

// Broadcast sends a signed transaction (hex) to the node
// (sendrawtransaction); one the node already has, in its mempool or in a
// block, is not an error. The hex alone, as a raw request: rpcclient's
// typed call takes Litecoin Core for an old bitcoind and adds a boolean
// where it wants a fee rate ("Amount is not a number or string").
func (c *Chain) Broadcast(ctx context.Context, rawHex string) error {
	raw, err := hex.DecodeString(rawHex)
	if err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	var tx wire.MsgTx
	if err := tx.Deserialize(bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	_, err = c.rawRequest(ctx, "sendrawtransaction", rawHex)
	if err != nil && alreadyKnown(err) {
		return nil
	}
	return err
}

// alreadyKnown tells a node's refusal of a transaction it already has:
// RPC_VERIFY_ALREADY_IN_CHAIN (-27) on both families, or the words each
// one uses.
func alreadyKnown(err error) bool {
	var re *btcjson.RPCError
	if errors.As(err, &re) && re.Code == btcjson.ErrRPCVerifyAlreadyInChain {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"already in block chain", "already exists in blockchain", "already known",
		"txn-already-in-mempool", "already have transaction", "outputs already in utxo set"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
