package solana

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Responses recorded from Solana mainnet (sources in testdata/SOURCE.md).
var (
	//go:embed testdata/getSignaturesForAddress.json
	recordedSignatures string
	//go:embed testdata/getTransaction.json
	recordedTransaction string
	//go:embed testdata/getSlot.json
	recordedSlot string
	//go:embed testdata/getBlockTime.json
	recordedBlockTime string
)

// Values of the recorded responses that the stand-in replaces.
const (
	recSigEntry = `{"blockTime":1679899845,"confirmationStatus":"finalized","err":null,"memo":"[8] transfer","signature":"2S2rTZjaqzxYRw9mnqzwtyqitKtSsnE8GVqLn1KrD5R2YpXZnU4GdjppsgfSAbrzJfaqadfi8CtrqEBy588WVQ3E","slot":184930610}`
	recSigTime  = `"blockTime":1679899845`
	recSigErr   = `"err":null`
	recSigSig   = `"signature":"2S2rTZjaqzxYRw9mnqzwtyqitKtSsnE8GVqLn1KrD5R2YpXZnU4GdjppsgfSAbrzJfaqadfi8CtrqEBy588WVQ3E"`
	recSigSlot  = `"slot":184930610`
	recID       = `"id":1}`

	recTxTime     = `"blockTime":1680146043`
	recTxSlot     = `"slot":185471096`
	recTxErr      = `"err":null`
	recTxStatus   = `"status":{"Ok":null}`
	recTxPre      = `"preBalances":[4421631439,9257455,0,1,521498880]`
	recTxPost     = `"postBalances":[4421621439,8257455,1000000,1,521498880]`
	recTxDest     = `2b7iQq3PbWwWTotRSDFNXT9DauU418aCHK4jcAzETUem`
	recTxLamports = `"lamports":1000000`
	recTxSig      = `"5QMfuqThWSMMpLCRe3tk7qn7iSwWKfJV8EvD1ZPvyqAWa7Z2JftZ4rPq8YCxCwzSykX7dMkDB8RrovQMoL9ZZWKY"`
	// recTxLastKey is the last of the recorded account keys (the memo
	// program): a Solana Pay wallet adds the reference after it.
	recTxLastKey = `{"pubkey":"MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr","signer":false,"source":"transaction","writable":false}]`

	recSlotResult = `"result": 1234`
	recSlotID     = `"id": 1 }`

	recBlockTimeResult = `"result": 1574721591`

	// failure is the error the stand-in gives a failed transaction (the
	// shape of a program's custom error in Solana's JSON).
	failure = `{"InstructionError":[0,{"Custom":1}]}`
)

// solTx is one transaction the stand-in has: a SOL transfer to To carrying
// the Solana Pay reference Ref.
type solTx struct {
	Sig       string
	Ref       string
	To        string
	Amount    int64
	Slot      int64
	BlockTime int64
	Failed    bool
	// Finalized: getSignaturesForAddress and getTransaction (commitment
	// finalized) only see finalized transactions.
	Finalized bool
	// Hidden: listed by getSignaturesForAddress but not served by
	// getTransaction yet (a lagging RPC node behind a load balancer).
	Hidden bool
	pre    int64 // To's balance before
}

// solanaStandIn is a hand-written stand-in for a Solana RPC node: no
// validator can run here. It answers getSignaturesForAddress, getTransaction
// (jsonParsed) and getSlot with the responses recorded from mainnet in
// testdata/, changed only where a test needs its own transactions: the
// signature, slot and block time; the recipient (the shop's address, in the
// account keys and the transfer instruction), the lamports transferred and
// the balances before and after (the recipient's running balance, the
// sender's debit); and for a failed transaction meta.err and status. The
// recorded transaction's other accounts, fee payer, memo, logs and second
// signature stay as recorded. As a Solana Pay wallet does, the reference
// key is added after the recorded accounts (read-only, no lamports).
type solanaStandIn struct {
	t     testing.TB
	srv   *httptest.Server
	mu    sync.Mutex
	slot  int64 // newest slot; finalized up to it unless a tx is not
	start time.Time
	// clock is the chain's time: the block time of each slot that has a
	// transaction or was reached by advance, in slot order.
	clock []slotTime
	// noBlockTime: getBlockTime answers the node's "block not available"
	// error (a node without the slot's time yet).
	noBlockTime bool
	txs         []*solTx
	balances    map[string]int64
	n           int
}

func newSolanaStandIn(t testing.TB, start time.Time) *solanaStandIn {
	t.Helper()
	s := &solanaStandIn{t: t, slot: 300_000_000, start: start, balances: map[string]int64{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// pay adds a finalized transfer of amount lamports to to with reference ref,
// in a new slot.
func (s *solanaStandIn) pay(ref, to string, amount int64) *solTx {
	return s.add(&solTx{Ref: ref, To: to, Amount: amount, Finalized: true})
}

func (s *solanaStandIn) add(tx *solTx) *solTx {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.slot += 3
	tx.Slot = s.slot
	// Two seconds after the previous transaction, and never before the
	// chain's time (advance).
	at := s.start.Add(time.Duration(s.n) * 2 * time.Second)
	if chain := s.timeAt(tx.Slot); chain.After(at) {
		at = chain
	}
	tx.BlockTime = at.Unix()
	s.clock = append(s.clock, slotTime{tx.Slot, at})
	// A base58 signature of the usual length, unique per transaction.
	tx.Sig = fmt.Sprintf("%s%08d", strings.Repeat("5", 80), s.n)
	tx.pre = s.balances[tx.To]
	if !tx.Failed {
		s.balances[tx.To] += tx.Amount
	}
	s.txs = append(s.txs, tx)
	return tx
}

// slotTime is a slot's block time.
type slotTime struct {
	slot int64
	at   time.Time
}

// advance moves the chain on by d (a slot every 400 ms), with no
// transaction of ours: a watcher down meanwhile finds it there.
func (s *solanaStandIn) advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slot += int64(d / (400 * time.Millisecond))
	s.clock = append(s.clock, slotTime{s.slot, s.timeAt(s.slot).Add(d)})
}

// timeAt is the block time of slot: that of the newest timed slot at or
// below it (the start before any).
func (s *solanaStandIn) timeAt(slot int64) time.Time {
	at := s.start
	for _, c := range s.clock {
		if c.slot <= slot {
			at = c.at
		}
	}
	return at
}

func (s *solanaStandIn) finalize(tx *solTx) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx.Finalized = true
}

func (s *solanaStandIn) reveal(tx *solTx) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx.Hidden = false
}

func (s *solanaStandIn) replace(tpl, old, new string, n int) string {
	if c := strings.Count(tpl, old); c != n {
		s.t.Errorf("solana stand-in: %q found %d times in the recorded response, want %d", old, c, n)
	}
	return strings.ReplaceAll(tpl, old, new)
}

func (s *solanaStandIn) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	id := string(req.ID)
	var cfg struct {
		Commitment                     string `json:"commitment"`
		Encoding                       string `json:"encoding"`
		MaxSupportedTransactionVersion *int   `json:"maxSupportedTransactionVersion"`
		Limit                          int    `json:"limit"`
		Before                         string `json:"before"`
		Until                          string `json:"until"`
	}
	var first string
	if len(req.Params) > 0 {
		_ = json.Unmarshal(req.Params[0], &first)
	}
	if len(req.Params) > 1 {
		_ = json.Unmarshal(req.Params[1], &cfg)
	}
	if req.Method == "getSlot" && len(req.Params) > 0 {
		_ = json.Unmarshal(req.Params[0], &cfg)
	}
	// The watcher must only ever read finalized data (getBlockTime takes
	// a slot alone: the finalized one, checked below).
	if cfg.Commitment != "finalized" && req.Method != "getBlockTime" {
		s.t.Errorf("solana stand-in: %s with commitment %q", req.Method, cfg.Commitment)
	}
	switch req.Method {
	case "getSlot":
		out := s.replace(recordedSlot, recSlotResult, fmt.Sprintf(`"result": %d`, s.finalizedSlot()), 1)
		_, _ = fmt.Fprint(w, s.replace(out, recSlotID, `"id": `+id+` }`, 1))
	case "getBlockTime":
		var slot int64
		if len(req.Params) != 1 || json.Unmarshal(req.Params[0], &slot) != nil || slot > s.finalizedSlot() {
			s.t.Errorf("solana stand-in: getBlockTime %s: want one finalized slot", req.Params)
		}
		if s.noBlockTime {
			// The error shape of Solana's documentation for this method.
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","error":{"code":-32004,"message":"Block not available for slot %d"},"id":%s}`, slot, id)
			return
		}
		out := s.replace(recordedBlockTime, recBlockTimeResult, fmt.Sprintf(`"result": %d`, s.timeAt(slot).Unix()), 1)
		_, _ = fmt.Fprint(w, s.replace(out, recSlotID, `"id": `+id+` }`, 1))
	case "getSignaturesForAddress":
		_, _ = fmt.Fprint(w, s.signatures(id, first, cfg.Limit, cfg.Before, cfg.Until))
	case "getTransaction":
		if cfg.Encoding != "jsonParsed" || cfg.MaxSupportedTransactionVersion == nil {
			s.t.Errorf("solana stand-in: getTransaction with encoding %q, maxSupportedTransactionVersion %v",
				cfg.Encoding, cfg.MaxSupportedTransactionVersion)
		}
		_, _ = fmt.Fprint(w, s.transaction(id, first))
	default:
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":%s}`, id)
	}
}

// finalizedSlot is the newest slot below every unfinalized transaction.
func (s *solanaStandIn) finalizedSlot() int64 {
	slot := s.slot
	for _, tx := range s.txs {
		if !tx.Finalized {
			slot = min(slot, tx.Slot-1)
		}
	}
	return slot
}

// signatures answers getSignaturesForAddress: the finalized transactions
// carrying the reference or paying the address, newest first, paged with before/until/limit as the
// node does.
func (s *solanaStandIn) signatures(id, ref string, limit int, before, until string) string {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var entries []string
	started := before == ""
	for i := len(s.txs) - 1; i >= 0 && len(entries) < limit; i-- {
		tx := s.txs[i]
		if (tx.Ref != ref && tx.To != ref) || !tx.Finalized {
			continue
		}
		if tx.Sig == until {
			break
		}
		if !started {
			started = tx.Sig == before
			continue
		}
		e := s.replace(recSigEntry, recSigTime, fmt.Sprintf(`"blockTime":%d`, tx.BlockTime), 1)
		e = s.replace(e, recSigSig, fmt.Sprintf(`"signature":"%s"`, tx.Sig), 1)
		e = s.replace(e, recSigSlot, fmt.Sprintf(`"slot":%d`, tx.Slot), 1)
		if tx.Failed {
			e = s.replace(e, recSigErr, `"err":`+failure, 1)
		}
		entries = append(entries, e)
	}
	out := s.replace(strings.TrimSpace(recordedSignatures), recSigEntry, strings.Join(entries, ","), 1)
	return s.replace(out, recID, `"id":`+id+`}`, 1)
}

// transaction answers getTransaction from the recorded SOL transfer.
func (s *solanaStandIn) transaction(id, sig string) string {
	var tx *solTx
	for _, t := range s.txs {
		if t.Sig == sig && t.Finalized && !t.Hidden {
			tx = t
		}
	}
	if tx == nil {
		return `{"jsonrpc":"2.0","result":null,"id":` + id + `}`
	}
	out := strings.TrimSpace(recordedTransaction)
	out = s.replace(out, recTxTime, fmt.Sprintf(`"blockTime":%d`, tx.BlockTime), 1)
	out = s.replace(out, recTxSlot, fmt.Sprintf(`"slot":%d`, tx.Slot), 1)
	out = s.replace(out, recTxDest, tx.To, 2)
	out = s.replace(out, recTxLamports, fmt.Sprintf(`"lamports":%d`, tx.Amount), 1)
	out = s.replace(out, recTxSig, `"`+tx.Sig+`"`, 1)
	// The sender (account 1) pays the amount; the fee payer (account 0)
	// pays the fee, as recorded.
	post := tx.pre + tx.Amount
	senderPre := 8257455 + tx.Amount
	if tx.Failed {
		post, senderPre = tx.pre, 8257455
		out = s.replace(out, recTxErr, `"err":`+failure, 1)
		out = s.replace(out, recTxStatus, `"status":{"Err":`+failure+`}`, 1)
	}
	// The reference, as a Solana Pay wallet adds it: a read-only account
	// of the transfer, with no lamports.
	refBalance := ""
	if tx.Ref != "" {
		out = s.replace(out, recTxLastKey, strings.TrimSuffix(recTxLastKey, "]")+
			`,{"pubkey":"`+tx.Ref+`","signer":false,"source":"transaction","writable":false}]`, 1)
		refBalance = ",0"
	}
	out = s.replace(out, recTxPre, fmt.Sprintf(`"preBalances":[4421631439,%d,%d,1,521498880%s]`, senderPre, tx.pre, refBalance), 1)
	out = s.replace(out, recTxPost, fmt.Sprintf(`"postBalances":[4421621439,8257455,%d,1,521498880%s]`, post, refBalance), 1)
	return s.replace(out, recID, `"id":`+id+`}`, 1)
}
