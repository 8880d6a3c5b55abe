package evm_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/kernodeck/kernodeck/chainwatch/evm"
)

// FuzzDecodeTransfer feeds receipt logs as a node answers them (JSON) to
// DecodeTransfer: only a Transfer log with three topics, zero padding and
// 32 bytes of data decodes, into exactly those addresses and amount.
//
//	go test ./chainwatch/evm -run '^$' -fuzz '^FuzzDecodeTransfer$' -fuzztime 10m
func FuzzDecodeTransfer(f *testing.F) {
	pad := func(b []byte) string { return common.BytesToHash(b).Hex() }
	seed := func(topics []string, data string) []byte {
		raw, _ := json.Marshal(map[string]any{
			"address": "0xdac17f958d2ee523a2206206994597c13d831ec7", "topics": topics, "data": data,
			"blockNumber": "0x1", "transactionHash": pad([]byte{1}), "transactionIndex": "0x0",
			"blockHash": pad([]byte{2}), "logIndex": "0x0", "removed": false,
		})
		return raw
	}
	from, to := pad(common.FromHex("0x1111111111111111111111111111111111111111")), pad(common.FromHex("0x2222222222222222222222222222222222222222"))
	f.Add(seed([]string{evm.TransferTopic.Hex(), from, to}, pad(big.NewInt(1_000_000).Bytes())))
	f.Add(seed([]string{evm.TransferTopic.Hex(), from, to, pad([]byte{7})}, "0x"))
	f.Add(seed([]string{evm.TransferTopic.Hex(), "0xff" + from[4:], to}, pad([]byte{1})))
	f.Add(seed([]string{evm.TransferTopic.Hex()}, "0x"+string(bytes.Repeat([]byte("ff"), 64))))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var l types.Log
		if err := json.Unmarshal(raw, &l); err != nil {
			return
		}
		gotFrom, gotTo, amount, ok := evm.DecodeTransfer(l)
		if !ok {
			return
		}
		if len(l.Topics) != 3 || l.Topics[0] != evm.TransferTopic || len(l.Data) != 32 {
			t.Fatalf("not a Transfer log, decoded: %s", raw)
		}
		if gotFrom != common.BytesToAddress(l.Topics[1][:]) || gotTo != common.BytesToAddress(l.Topics[2][:]) ||
			common.BytesToHash(gotFrom.Bytes()) != l.Topics[1] || common.BytesToHash(gotTo.Bytes()) != l.Topics[2] {
			t.Fatalf("addresses %s %s from padded topics %v", gotFrom, gotTo, l.Topics)
		}
		if amount.Sign() < 0 || amount.Cmp(new(big.Int).SetBytes(l.Data)) != 0 {
			t.Fatalf("amount %s from %x", amount, l.Data)
		}
	})
}
