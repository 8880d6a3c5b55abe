package utxo_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"go/build"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
)

// node is a regtest node a test can mine on and pay from.
type node interface {
	// cfg is how a Chain reaches the node.
	cfg() utxo.Config
	// mine mines n blocks and returns their hashes.
	mine(n int) []string
	// pay broadcasts a transaction paying amount base units to addr and
	// returns its txid and signed hex (to re-broadcast after a reorg).
	pay(addr string, amount int64) (txid, rawHex string)
	// sign is pay without the broadcast.
	sign(addr string, amount int64) (txid, rawHex string)
	// notifier is a peer-to-peer connection to the node.
	notifier() *utxo.P2P
	// call is a raw JSON-RPC call.
	call(method string, params ...any) (json.RawMessage, error)
	// hdNetwork is the hdwallet network of deposit addresses.
	hdNetwork() hdwallet.Network
	// policy is the confirmation count the tests use (the production
	// defaults: BTC 2, LTC 6).
	policy() int64
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess starts a node and stops it (SIGTERM, then SIGKILL) when the
// test ends. Its output goes to a log file kept in the test's temp dir and
// shown when the test fails.
func startProcess(t testing.TB, name string, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// rawCall is a JSON-RPC call through a Chain's rpcclient.
func rawCall(c *utxo.Chain, method string, params ...any) (json.RawMessage, error) {
	ps := make([]json.RawMessage, len(params))
	for i, p := range params {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		ps[i] = b
	}
	return c.RPC().RawRequest(method, ps)
}

// waitRPC waits until the node answers getblockcount.
func waitRPC(t testing.TB, c *utxo.Chain, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Tip(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --- btcd ---

// btcdNode is btcd in regtest. It has no wallet: blocks pay the test's own
// key (P2WPKH), and payments spend mature coinbases signed here.
type btcdNode struct {
	t     testing.TB
	p2p   string // peer-to-peer endpoint
	conf  utxo.Config
	chain *utxo.Chain
	key   *btcec.PrivateKey
	pk    []byte // the key's P2WPKH script

	mu      sync.Mutex
	scanned int64 // coinbases known up to this height
	coins   []coinbase
}

type coinbase struct {
	op     wire.OutPoint
	value  int64
	height int64
}

func btcdBinary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("btcd"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "btcd")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("btcd not found: run scripts/ensure-tools.sh (go install github.com/btcsuite/btcd@v0.24.2)")
	}
	return p
}

// startBtcd starts btcd on a free port in a temp dir and mines 101+ blocks
// so coinbases can be spent.
func startBtcd(t testing.TB) *btcdNode {
	t.Helper()
	key, err := btcec.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(key.PubKey().SerializeCompressed()), &chaincfg.RegressionNetParams)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := txscript.PayToAddrScript(addr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port, p2p := freePort(t), freePort(t)
	// The watcher's peer-to-peer connection hears of new transactions
	// after at most the trickle interval.
	startProcess(t, "btcd", btcdBinary(t), "--regtest", "--configfile=",
		"--datadir="+filepath.Join(dir, "data"), "--logdir="+filepath.Join(dir, "logs"),
		"--listen=127.0.0.1:"+strconv.Itoa(p2p), "--trickleinterval=50ms",
		"--rpclisten=127.0.0.1:"+strconv.Itoa(port), "--notls",
		"--rpcuser=u", "--rpcpass=p", "--miningaddr="+addr.EncodeAddress(), "--txindex")
	n := &btcdNode{t: t, key: key, pk: pk, p2p: "127.0.0.1:" + strconv.Itoa(p2p),
		conf: utxo.Config{Host: "127.0.0.1:" + strconv.Itoa(port), User: "u", Pass: "p", Network: "bitcoin"}}
	n.chain = newChain(t, n.conf)
	waitRPC(t, n.chain, "btcd")
	// Segwit activates through BIP9 on btcd's regtest: three 144-block
	// windows (432 blocks) before a witness spend is accepted.
	n.mine(440)
	return n
}

func newChain(t testing.TB, cfg utxo.Config) *utxo.Chain {
	t.Helper()
	c, err := utxo.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (n *btcdNode) cfg() utxo.Config    { return n.conf }
func (n *btcdNode) notifier() *utxo.P2P { return newP2P(n.t, n.p2p, "bitcoin") }

func newP2P(t testing.TB, addr, network string) *utxo.P2P {
	params, err := utxo.Params(network, "regtest")
	if err != nil {
		t.Fatal(err)
	}
	return &utxo.P2P{Addr: addr, Params: params, Asset: map[string]string{"bitcoin": "BTC", "litecoin": "LTC"}[network]}
}
func (n *btcdNode) hdNetwork() hdwallet.Network { return hdwallet.BitcoinRegtest }
func (n *btcdNode) policy() int64               { return 2 }

func (n *btcdNode) call(method string, params ...any) (json.RawMessage, error) {
	return rawCall(n.chain, method, params...)
}

func (n *btcdNode) mine(k int) []string {
	n.t.Helper()
	hashes, err := n.chain.RPC().Generate(uint32(k))
	if err != nil {
		n.t.Fatalf("btcd generate %d: %v", k, err)
	}
	out := make([]string, len(hashes))
	for i, h := range hashes {
		out[i] = h.String()
	}
	return out
}

// matureCoin takes a coinbase of the test's key with 100+ confirmations
// that no earlier payment spent, mining more blocks when none is left.
func (n *btcdNode) matureCoin() coinbase {
	n.t.Helper()
	for {
		if c, ok := n.takeCoin(); ok {
			return c
		}
		n.mine(10)
	}
}

func (n *btcdNode) takeCoin() (coinbase, bool) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	rpc := n.chain.RPC()
	tip, err := rpc.GetBlockCount()
	if err != nil {
		n.t.Fatal(err)
	}
	for h := n.scanned + 1; h <= tip-100; h++ {
		hash, err := rpc.GetBlockHash(h)
		if err != nil {
			n.t.Fatal(err)
		}
		b, err := rpc.GetBlock(hash)
		if err != nil {
			n.t.Fatal(err)
		}
		cb := b.Transactions[0]
		if len(cb.TxOut) > 0 && bytes.Equal(cb.TxOut[0].PkScript, n.pk) {
			n.coins = append(n.coins, coinbase{op: wire.OutPoint{Hash: cb.TxHash(), Index: 0}, value: cb.TxOut[0].Value, height: h})
		}
		n.scanned = h
	}
	if len(n.coins) == 0 {
		return coinbase{}, false
	}
	c := n.coins[0]
	n.coins = n.coins[1:]
	return c, true
}

func (n *btcdNode) pay(addr string, amount int64) (string, string) {
	n.t.Helper()
	txid, rawHex := n.sign(addr, amount)
	if _, err := n.call("sendrawtransaction", rawHex); err != nil {
		n.t.Fatalf("btcd sendrawtransaction: %v", err)
	}
	return txid, rawHex
}

// sign spends a mature coinbase: amount to addr, the rest (less a fee)
// back to the test's key, signed as P2WPKH.
func (n *btcdNode) sign(addr string, amount int64) (string, string) {
	n.t.Helper()
	coin := n.matureCoin()
	to, err := btcutil.DecodeAddress(addr, &chaincfg.RegressionNetParams)
	if err != nil {
		n.t.Fatal(err)
	}
	script, err := txscript.PayToAddrScript(to)
	if err != nil {
		n.t.Fatal(err)
	}
	const fee = 10_000
	tx := wire.NewMsgTx(2)
	tx.AddTxIn(wire.NewTxIn(&coin.op, nil, nil))
	tx.AddTxOut(wire.NewTxOut(amount, script))
	tx.AddTxOut(wire.NewTxOut(coin.value-amount-fee, n.pk))
	fetcher := txscript.NewCannedPrevOutputFetcher(n.pk, coin.value)
	wit, err := txscript.WitnessSignature(tx, txscript.NewTxSigHashes(tx, fetcher), 0, coin.value, n.pk, txscript.SigHashAll, n.key, true)
	if err != nil {
		n.t.Fatal(err)
	}
	tx.TxIn[0].Witness = wit
	var buf bytes.Buffer
	if err := tx.Serialize(&buf); err != nil {
		n.t.Fatal(err)
	}
	return tx.TxHash().String(), hex.EncodeToString(buf.Bytes())
}

// --- Litecoin Core ---

// litecoinNode is Litecoin Core in regtest, with its wallet.
type litecoinNode struct {
	t     testing.TB
	p2p   string // peer-to-peer endpoint
	conf  utxo.Config
	chain *utxo.Chain
	miner string // a wallet address blocks pay
}

const litecoindPath = "/usr/lib/litecoin/litecoind"

func startLitecoind(t testing.TB) *litecoinNode {
	t.Helper()
	if _, err := os.Stat(litecoindPath); err != nil {
		t.Fatalf("%s not found: run scripts/ensure-tools.sh (apt-get install litecoind)", litecoindPath)
	}
	port, p2p := freePort(t), freePort(t)
	// The /usr/bin wrapper is skipped: it is the daemon binary that takes
	// these flags as they are. The watcher's peer-to-peer connection comes
	// from loopback, whitelisted: Core announces transactions to it without
	// the inbound trickle delay.
	startProcess(t, "litecoind", litecoindPath, "-regtest", "-datadir="+t.TempDir(), "-server",
		"-listen=1", "-bind=127.0.0.1:"+strconv.Itoa(p2p), "-port="+strconv.Itoa(p2p), "-discover=0", "-dnsseed=0",
		"-whitelist=noban@127.0.0.1", "-mempoolreplacement=1", // BIP125 replacements, as Bitcoin nodes accept them
		"-rpcbind=127.0.0.1", "-rpcallowip=127.0.0.1", "-rpcport="+strconv.Itoa(port),
		"-rpcuser=u", "-rpcpassword=p", "-txindex=1", "-fallbackfee=0.0001", "-printtoconsole=0")
	n := &litecoinNode{t: t, p2p: "127.0.0.1:" + strconv.Itoa(p2p),
		conf: utxo.Config{Host: "127.0.0.1:" + strconv.Itoa(port), User: "u", Pass: "p", Network: "litecoin"}}
	n.chain = newChain(t, n.conf)
	waitRPC(t, n.chain, "litecoind")
	// Litecoin Core 0.21 creates no wallet by itself.
	if _, err := n.call("createwallet", "test"); err != nil {
		t.Fatalf("createwallet: %v", err)
	}
	raw, err := n.call("getnewaddress")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &n.miner); err != nil {
		t.Fatal(err)
	}
	n.mine(110)
	return n
}

func (n *litecoinNode) cfg() utxo.Config            { return n.conf }
func (n *litecoinNode) notifier() *utxo.P2P         { return newP2P(n.t, n.p2p, "litecoin") }
func (n *litecoinNode) hdNetwork() hdwallet.Network { return hdwallet.LitecoinRegtest }
func (n *litecoinNode) policy() int64               { return 6 }

func (n *litecoinNode) call(method string, params ...any) (json.RawMessage, error) {
	return rawCall(n.chain, method, params...)
}

func (n *litecoinNode) mine(k int) []string {
	n.t.Helper()
	// A fresh coinbase address each time: after invalidateblock, the same
	// template mined to the same address within the same second is the very
	// block just invalidated, which the node refuses.
	raw, err := n.call("getnewaddress")
	if err != nil {
		n.t.Fatal(err)
	}
	var to string
	if err := json.Unmarshal(raw, &to); err != nil {
		n.t.Fatal(err)
	}
	raw, err = n.call("generatetoaddress", k, to)
	if err != nil {
		n.t.Fatalf("litecoind generatetoaddress %d: %v", k, err)
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		n.t.Fatal(err)
	}
	return out
}

// pay uses the wallet's sendtoaddress with the amount as an exact decimal
// string, then reads the transaction back for its hex.
func (n *litecoinNode) pay(addr string, amount int64) (string, string) {
	n.t.Helper()
	raw, err := n.call("sendtoaddress", addr, domain.FormatUnits(big.NewInt(amount), 8))
	if err != nil {
		n.t.Fatalf("litecoind sendtoaddress %s %d: %v", addr, amount, err)
	}
	var txid string
	if err := json.Unmarshal(raw, &txid); err != nil {
		n.t.Fatal(err)
	}
	raw, err = n.call("getrawtransaction", txid)
	if err != nil {
		n.t.Fatal(err)
	}
	var rawHex string
	if err := json.Unmarshal(raw, &rawHex); err != nil {
		n.t.Fatal(err)
	}
	return txid, rawHex
}

// sign funds and signs a payment with the wallet (fundrawtransaction,
// signrawtransactionwithwallet) without broadcasting it.
func (n *litecoinNode) sign(addr string, amount int64) (string, string) {
	n.t.Helper()
	var created, funded struct {
		Hex string `json:"hex"`
	}
	n.decode(&created.Hex, "createrawtransaction", []any{}, map[string]any{addr: json.Number(domain.FormatUnits(big.NewInt(amount), 8))})
	n.decode(&funded, "fundrawtransaction", created.Hex)
	var signed struct {
		Hex      string `json:"hex"`
		Complete bool   `json:"complete"`
	}
	n.decode(&signed, "signrawtransactionwithwallet", funded.Hex)
	if !signed.Complete {
		n.t.Fatal("litecoind signrawtransactionwithwallet: not complete")
	}
	raw, _ := hex.DecodeString(signed.Hex)
	var tx wire.MsgTx
	if err := tx.Deserialize(bytes.NewReader(raw)); err != nil {
		n.t.Fatal(err)
	}
	return tx.TxHash().String(), signed.Hex
}

func (n *litecoinNode) decode(out any, method string, params ...any) {
	n.t.Helper()
	raw, err := n.call(method, params...)
	if err != nil {
		n.t.Fatalf("litecoind %s: %v", method, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		n.t.Fatal(err)
	}
}

// --- helpers shared by the scenarios ---

// newAccount makes a fresh watch-only account (a random seed's BIP84
// account key, as a wallet would export it) so that no two harnesses on one
// node derive the same deposit addresses.
func newAccount(t testing.TB, network hdwallet.Network) *hdwallet.Account {
	t.Helper()
	seed := make([]byte, 32)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	k, err := hdkeychain.NewMaster(seed, &chaincfg.RegressionNetParams)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint32{84, 1, 0} {
		if k, err = k.Derive(hdkeychain.HardenedKeyStart + i); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := k.Neuter()
	if err != nil {
		t.Fatal(err)
	}
	acct, err := hdwallet.ParseAccountKey(network, pub.String())
	if err != nil {
		t.Fatal(err)
	}
	return acct
}

// inMempool reports whether txid waits in the node's mempool.
func inMempool(t testing.TB, n node, txid string) bool {
	t.Helper()
	raw, err := n.call("getrawmempool")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id == txid {
			return true
		}
	}
	return false
}

// rebroadcast sends a transaction again unless the node already has it (a
// node puts the transactions of a disconnected block back in its mempool,
// but the test must not depend on it).
func rebroadcast(t testing.TB, n node, txid, rawHex string) {
	t.Helper()
	if inMempool(t, n, txid) {
		t.Logf("%s is back in the mempool after the reorg", txid)
		return
	}
	t.Logf("%s is not in the mempool after the reorg: broadcasting it again", txid)
	if _, err := n.call("sendrawtransaction", rawHex); err != nil && !strings.Contains(err.Error(), "already") {
		t.Fatalf("re-broadcast %s: %v", txid, err)
	}
}

// holdBack keeps a mempool transaction out of (or lets it back into) the
// blocks this node mines, through a fee delta (prioritisetransaction): a
// competing chain can then be mined without it. btcd has no such call.
func (n *litecoinNode) holdBack(txid string, hold bool) {
	n.t.Helper()
	delta := int64(100_000_000)
	if hold {
		delta = -delta
	}
	if _, err := n.call("prioritisetransaction", txid, 0, delta); err != nil {
		n.t.Fatalf("prioritisetransaction %s: %v", txid, err)
	}
}

// forEachNode runs f as a subtest on btcd and on Litecoin Core.
func forEachNode(t *testing.T, f func(t *testing.T, n node)) {
	for _, c := range []struct {
		name  string
		start func(testing.TB) node
	}{
		{"bitcoin", func(t testing.TB) node { return startBtcd(t) }},
		{"litecoin", func(t testing.TB) node { return startLitecoind(t) }},
	} {
		t.Run(c.name, func(t *testing.T) { f(t, c.start(t)) })
	}
}
