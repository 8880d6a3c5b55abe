package tron

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Responses recorded from Tron mainnet (sources in testdata/SOURCE.md).
var (
	//go:embed testdata/getblockbynum.json
	recordedBlock string
	//go:embed testdata/gettransactioninfobyblocknum.json
	recordedInfos string
	//go:embed testdata/getnowblock.json
	recordedNowBlock string
)

// Values of the recorded responses that the stand-in replaces.
const (
	recBlockID    = `"blockID": "0000000001d6f4a09f60c27befccff6fe3cc593b2d6c46cdc79d3fd4f55db859"`
	recNumber     = `"number": 30864544`
	recParentHash = `"parentHash": "0000000001d6f49f615231bdeeddd8b563c746188d5e270a58afc87b059f29de"`
	recBlockTime  = `"timestamp": 1623055923000`
	recAmount     = `"amount": 50000000`
	recTo         = `"to_address": "4158c85b7b6a5118beb3b23c14fcb2f3551a81d79a"`
	recTxID       = `"txID": "979e0823f455f3b67d65b351052f0265233f422792d31d5dbeb7c24737dd5556"`
	recRet        = `"contractRet": "SUCCESS"`
	recValue      = `"value": {
                                "amount": 50000000,
                                "owner_address": "41c33eeefda1059afba41d86759e281bcb851edfc8",
                                "to_address": "4158c85b7b6a5118beb3b23c14fcb2f3551a81d79a"
                            }`
	recTypeURL      = `"type_url": "type.googleapis.com/protocol.TransferContract"`
	recType         = `"type": "TransferContract"`
	recInfoBlock    = `"blockNumber": 30864600`
	recInfoTime     = `"blockTimeStamp": 1623056091000`
	recInfoPlainID  = `"id": "8971d5c2c3b45dee02860ce821e9c2ba601424c311a7a80545848a4c4c09b4a1"`
	recInfoTokenID  = `"id": "0af79242191c6728b79e858a36a4b5c65e4e52b9fcee4dc5af30eac57b6d0953"`
	recLogData      = `"data": "000000000000000000000000000000000000000000000000000000001fb6e57f"`
	recLogTo        = `"0000000000000000000000000d0707963952f2fba59dd06f2b425ace40b492fe"`
	recLogContract  = `"address": "a614f803b6fd780986a42c78ec9c7f77e6ded13c"`
	recInfoContract = `"contract_address": "41a614f803b6fd780986a42c78ec9c7f77e6ded13c"`
	recReceiptOK    = `"result": "SUCCESS"`
	// usdtMainnet is the contract of the recorded TRC-20 transfer: Tether's
	// USDT on Tron mainnet.
	usdtMainnet = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
)

// standInTx is one transaction the stand-in puts in a block.
type standInTx struct {
	ID       string
	Token    bool     // a TRC-20 transfer (else a TRX TransferContract)
	Contract [20]byte // the token contract (USDT mainnet if zero)
	To       string   // T-address
	Amount   *big.Int
	// Failed marks the transaction failed: contractRet REVERT for a TRX
	// transfer, receipt result REVERT for a token transfer.
	Failed bool
}

// tronStandIn is a hand-written stand-in for a java-tron node's HTTP API:
// no Tron node can run here. It answers /walletsolidity/getnowblock,
// /walletsolidity/getblockbynum, /walletsolidity/gettransactioninfobyblocknum
// and /wallet/getnowblock with the responses recorded from mainnet in
// testdata/, changed only where a test needs its own chain: the block's
// number, ID, parent and time, and each transaction's ID, recipient, amount
// and outcome. Everything else (field names, nesting, hex forms, the
// signatures and raw_data_hex, which no longer match the changed fields and
// which the watcher does not check) is the recorded text. A block holds
// only the test's transactions; an empty block has no "transactions" key,
// as java-tron prints it.
//
// The chain's head can run ahead of its solidified block, as on the real
// network: the solidity endpoints answer nothing above the solidified
// height ({} for a block, as java-tron does).
type tronStandIn struct {
	t     testing.TB
	srv   *httptest.Server
	mu    sync.Mutex
	head  int64
	solid int64
	base  int64
	start time.Time
	txs   map[int64][]standInTx
	calls map[string]int
}

func newTronStandIn(t testing.TB, start time.Time) *tronStandIn {
	t.Helper()
	s := &tronStandIn{t: t, head: 1000, solid: 1000, base: 1000, start: start,
		txs: map[int64][]standInTx{}, calls: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// blockID is a block's ID as Tron forms it: the height in the first 8 bytes.
func standInBlockID(n int64) string {
	h := sha256.Sum256(fmt.Appendf(nil, "kernodeck tron stand-in block %d", n))
	return fmt.Sprintf("%016x", n) + hex.EncodeToString(h[8:])
}

func (s *tronStandIn) blockTime(n int64) time.Time {
	return s.start.Add(time.Duration(n-s.base) * 3 * time.Second)
}

// mine appends a block holding txs above the head; it is not solidified.
func (s *tronStandIn) mine(txs ...standInTx) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head++
	s.txs[s.head] = txs
	return s.head
}

// solidify makes the blocks up to n solidified.
func (s *tronStandIn) solidify(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.solid = max(s.solid, min(n, s.head))
}

// mineSolid mines a block and solidifies it at once.
func (s *tronStandIn) mineSolid(txs ...standInTx) int64 {
	n := s.mine(txs...)
	s.solidify(n)
	return n
}

func (s *tronStandIn) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[r.URL.Path]++
	var req struct {
		Num int64 `json:"num"`
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/walletsolidity/getnowblock":
		_, _ = fmt.Fprint(w, s.renderBlock(s.solid))
	case "/wallet/getnowblock":
		_, _ = fmt.Fprint(w, s.renderBlock(s.head))
	case "/walletsolidity/getblockbynum":
		if req.Num <= 0 || req.Num > s.solid {
			_, _ = fmt.Fprint(w, "{}")
			return
		}
		_, _ = fmt.Fprint(w, s.renderBlock(req.Num))
	case "/walletsolidity/gettransactioninfobyblocknum":
		if req.Num <= 0 {
			_, _ = fmt.Fprint(w, "{}")
			return
		}
		if req.Num > s.solid {
			_, _ = fmt.Fprint(w, "[]")
			return
		}
		_, _ = fmt.Fprint(w, s.renderInfos(req.Num))
	default:
		http.NotFound(w, r)
	}
}

// replaceOnce swaps the one occurrence of old in tpl; a template that no
// longer holds it exactly once is a broken test, not a broken watcher.
func (s *tronStandIn) replaceOnce(tpl, old, new string) string {
	if n := strings.Count(tpl, old); n != 1 {
		s.t.Errorf("tron stand-in: %q found %d times in the recorded response", old, n)
		return tpl
	}
	return strings.Replace(tpl, old, new, 1)
}

func (s *tronStandIn) renderBlock(n int64) string {
	const txKey = ",\n    \"transactions\": ["
	head, rest, ok := strings.Cut(strings.TrimSpace(recordedBlock), txKey)
	if !ok {
		s.t.Fatal("tron stand-in: recorded block has no transactions")
	}
	txTpl := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "}")), "]"))
	head = s.replaceOnce(head, recBlockID, fmt.Sprintf(`"blockID": "%s"`, standInBlockID(n)))
	head = s.replaceOnce(head, recNumber, fmt.Sprintf(`"number": %d`, n))
	head = s.replaceOnce(head, recParentHash, fmt.Sprintf(`"parentHash": "%s"`, standInBlockID(n-1)))
	head = s.replaceOnce(head, recBlockTime, fmt.Sprintf(`"timestamp": %d`, s.blockTime(n).UnixMilli()))
	txs := s.txs[n]
	if len(txs) == 0 {
		return head + "\n}"
	}
	var parts []string
	for _, tx := range txs {
		to, err := ParseAddress(tx.To)
		if err != nil {
			s.t.Fatal(err)
		}
		t := s.replaceOnce(txTpl, recTxID, fmt.Sprintf(`"txID": "%s"`, tx.ID))
		ret := "SUCCESS"
		if tx.Failed && !tx.Token {
			ret = "REVERT"
		}
		t = s.replaceOnce(t, recRet, fmt.Sprintf(`"contractRet": "%s"`, ret))
		if !tx.Token {
			t = s.replaceOnce(t, recAmount, fmt.Sprintf(`"amount": %s`, tx.Amount))
			t = s.replaceOnce(t, recTo, fmt.Sprintf(`"to_address": "41%x"`, to))
		} else {
			// A TRC-20 transfer is a TriggerSmartContract calling
			// transfer(to, amount) on the token, in java-tron's printed
			// shape (owner, contract, call data in hex).
			data := "a9059cbb" + fmt.Sprintf("%064x", to) + fmt.Sprintf("%064x", tx.Amount)
			t = s.replaceOnce(t, recValue, fmt.Sprintf(`"value": {
                                "contract_address": "41%x",
                                "data": "%s",
                                "owner_address": "41c33eeefda1059afba41d86759e281bcb851edfc8"
                            }`, s.contract(tx), data))
			t = s.replaceOnce(t, recTypeURL, `"type_url": "type.googleapis.com/protocol.TriggerSmartContract"`)
			t = s.replaceOnce(t, recType, `"type": "TriggerSmartContract"`)
		}
		parts = append(parts, t)
	}
	return head + txKey + "\n        " + strings.Join(parts, ",\n        ") + "\n    ]\n}"
}

func (s *tronStandIn) contract(tx standInTx) [20]byte {
	if tx.Contract == ([20]byte{}) {
		c, err := ParseAddress(usdtMainnet)
		if err != nil {
			s.t.Fatal(err)
		}
		return c
	}
	return tx.Contract
}

// renderInfos answers gettransactioninfobyblocknum: the recorded receipt of
// a plain transfer for each TRX transaction, the recorded USDT receipt for
// each token transfer.
func (s *tronStandIn) renderInfos(n int64) string {
	body := strings.TrimSpace(recordedInfos)
	body = strings.TrimSuffix(strings.TrimPrefix(body, "["), "]")
	plainTpl, tokenTpl, ok := strings.Cut(body, "\n    },\n    {\n")
	if !ok {
		s.t.Fatal("tron stand-in: recorded receipts are not two")
	}
	plainTpl = strings.TrimSpace(plainTpl) + "\n    }"
	tokenTpl = "{\n" + strings.TrimRight(tokenTpl, " \n")
	var parts []string
	for _, tx := range s.txs[n] {
		tpl := plainTpl
		id := recInfoPlainID
		if tx.Token {
			tpl, id = tokenTpl, recInfoTokenID
		}
		t := s.replaceOnce(tpl, recInfoBlock, fmt.Sprintf(`"blockNumber": %d`, n))
		t = s.replaceOnce(t, recInfoTime, fmt.Sprintf(`"blockTimeStamp": %d`, s.blockTime(n).UnixMilli()))
		t = s.replaceOnce(t, id, fmt.Sprintf(`"id": "%s"`, tx.ID))
		if tx.Token {
			to, err := ParseAddress(tx.To)
			if err != nil {
				s.t.Fatal(err)
			}
			c := s.contract(tx)
			t = s.replaceOnce(t, recLogData, fmt.Sprintf(`"data": "%064x"`, tx.Amount))
			t = s.replaceOnce(t, recLogTo, fmt.Sprintf(`"%064x"`, to))
			t = s.replaceOnce(t, recLogContract, fmt.Sprintf(`"address": "%x"`, c))
			t = s.replaceOnce(t, recInfoContract, fmt.Sprintf(`"contract_address": "41%x"`, c))
			if tx.Failed {
				t = s.replaceOnce(t, recReceiptOK, `"result": "REVERT"`)
			}
		}
		parts = append(parts, t)
	}
	return "[\n    " + strings.Join(parts, ",\n    ") + "\n]"
}
