package evm_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"
)

// The minimal ERC-20 of testdata/, compiled with solc-js (see its README).
var (
	//go:embed testdata/TestToken.abi
	tokenABIJSON string
	//go:embed testdata/TestToken.bin
	tokenBin string
	tokenABI = func() abi.ABI {
		a, err := abi.JSON(strings.NewReader(tokenABIJSON))
		if err != nil {
			panic(err)
		}
		return a
	}()
)

// revertingAddr holds code that reverts whatever it receives: it stands for
// a deposit address a value transfer can fail to (an account with code, as
// an EIP-7702-delegated one), to mine a failed payment.
var revertingAddr = common.HexToAddress("0x00000000000000000000000000000000000BAD01")

// simChain is a go-ethereum simulated chain (chain id 1337) with a funded
// payer and two deployed test tokens, USDT and USDC (6 decimals). Without
// sim, it drives a geth --dev node through client instead.
type simChain struct {
	t      testing.TB
	ctx    context.Context
	sim    *simulated.Backend
	client simulated.Client
	key    *ecdsa.PrivateKey
	from   common.Address
	signer types.Signer
	tokens map[string]common.Address // asset -> contract
	// nextNonce follows this payer's sends (the pool may lag behind).
	nextNonce uint64
}

func newSimChain(t testing.TB) *simChain {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	funds := new(big.Int).Mul(big.NewInt(1_000_000), big.NewInt(params.Ether))
	sim := simulated.NewBackend(types.GenesisAlloc{
		from:          {Balance: funds},
		revertingAddr: {Code: common.FromHex("0x60006000fd"), Balance: big.NewInt(0)}, // PUSH1 0 PUSH1 0 REVERT
	})
	t.Cleanup(func() { _ = sim.Close() })
	c := &simChain{
		t: t, ctx: context.Background(), sim: sim, client: sim.Client(), key: key, from: from,
		signer: types.LatestSignerForChainID(big.NewInt(1337)), tokens: map[string]common.Address{},
	}
	for _, asset := range []string{"USDT", "USDC"} {
		c.tokens[asset] = c.deployToken(asset)
	}
	return c
}

// tokenConfig is the Tokens map of evm.Config and payments.Network.
func (c *simChain) tokenConfig(byAsset bool) map[string]string {
	m := map[string]string{}
	for asset, addr := range c.tokens {
		if byAsset {
			m[asset] = addr.Hex()
		} else {
			m[addr.Hex()] = asset
		}
	}
	return m
}

func (c *simChain) deployToken(symbol string) common.Address {
	c.t.Helper()
	supply := new(big.Int).Mul(big.NewInt(1_000_000_000), big.NewInt(1_000_000)) // 1e9 tokens, 6 decimals
	args, err := tokenABI.Pack("", "Test "+symbol, symbol, uint8(6), supply)
	if err != nil {
		c.t.Fatal(err)
	}
	tx := c.send(nil, nil, append(common.FromHex(strings.TrimSpace(tokenBin)), args...), 0)
	if c.sim != nil {
		c.commit() // geth --dev seals by itself
	}
	r := c.receipt(tx)
	if r.Status != types.ReceiptStatusSuccessful {
		c.t.Fatalf("deploy %s failed", symbol)
	}
	return r.ContractAddress
}

// send signs and sends a transaction from the payer (to nil: a contract
// creation). Gas 0 is estimated; a fixed gas gets a failing call mined.
func (c *simChain) send(to *common.Address, value *big.Int, data []byte, gas uint64) *types.Transaction {
	c.t.Helper()
	if value == nil {
		value = new(big.Int)
	}
	nonce, err := c.client.PendingNonceAt(c.ctx, c.from)
	if err != nil {
		c.t.Fatal(err)
	}
	// The pool's pending nonce lags behind quick sends: never go below the
	// next nonce this payer used.
	nonce = max(nonce, c.nextNonce)
	c.nextNonce = nonce + 1
	head, err := c.client.HeaderByNumber(c.ctx, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if gas == 0 {
		gas, err = c.client.EstimateGas(c.ctx, ethereum.CallMsg{From: c.from, To: to, Value: value, Data: data})
		if err != nil {
			c.t.Fatalf("estimate gas: %v", err)
		}
	}
	tip := big.NewInt(params.GWei)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
		ChainID: big.NewInt(1337), Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas,
		To: to, Value: value, Data: data,
	}), c.signer, c.key)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.client.SendTransaction(c.ctx, tx); err != nil {
		c.t.Fatalf("send: %v", err)
	}
	c.waitPending(tx)
	return tx
}

// waitPending returns once the pool holds tx as executable: the pool
// promotes transactions in the background, and a block sealed before that
// would leave tx out (seen on a loaded machine).
func (c *simChain) waitPending(tx *types.Transaction) {
	c.t.Helper()
	for i := 0; ; i++ {
		n, err := c.client.PendingNonceAt(c.ctx, c.from)
		if err == nil && n > tx.Nonce() {
			return
		}
		if i == 1000 {
			c.t.Fatalf("tx %s never became pending (pending nonce %d, %v)", tx.Hash().Hex(), n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resend puts an already signed transaction back in the pool (after a
// reorganisation dropped it); the pool may already have it.
func (c *simChain) resend(tx *types.Transaction) {
	c.t.Helper()
	if err := c.client.SendTransaction(c.ctx, tx); err != nil && !strings.Contains(err.Error(), "already known") {
		c.t.Fatalf("resend %s: %v", tx.Hash().Hex(), err)
	}
	c.waitPending(tx)
}

// pay sends amount of asset ("ETH", "USDT", "USDC") to address.
func (c *simChain) pay(asset, address string, amount *big.Int) *types.Transaction {
	c.t.Helper()
	to := common.HexToAddress(address)
	if asset == "ETH" {
		return c.send(&to, amount, nil, 0)
	}
	return c.payToken(asset, to, amount, 0)
}

func (c *simChain) payToken(asset string, to common.Address, amount *big.Int, gas uint64) *types.Transaction {
	c.t.Helper()
	contract, ok := c.tokens[asset]
	if !ok {
		c.t.Fatalf("no token %s", asset)
	}
	data, err := tokenABI.Pack("transfer", to, amount)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.send(&contract, nil, data, gas)
}

// receipt waits for tx's receipt on the canonical chain.
func (c *simChain) receipt(tx *types.Transaction) *types.Receipt {
	c.t.Helper()
	for i := 0; ; i++ {
		r, err := c.client.TransactionReceipt(c.ctx, tx.Hash())
		if err == nil {
			return r
		}
		// geth answers "transaction indexing is in progress" at start.
		retry := errors.Is(err, ethereum.NotFound) || strings.Contains(err.Error(), "indexing is in progress")
		if !retry || i == 750 { // 15 s: the indexer lags on a loaded machine
			c.t.Fatalf("receipt %s: %v", tx.Hash().Hex(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mine seals n blocks and returns the last one's hash.
func (c *simChain) mine(n int) common.Hash {
	var h common.Hash
	for range n {
		h = c.commit()
	}
	return h
}

// commit seals one block. The simulated backend only logs a failed sealing
// (it happens on a loaded machine: the payload is not built in time), so
// check that the head moved and seal again if it did not.
func (c *simChain) commit() common.Hash {
	c.t.Helper()
	before := c.head().Number.Uint64()
	for try := 0; ; try++ {
		h := c.sim.Commit()
		if c.head().Number.Uint64() > before {
			return h
		}
		if try == 20 {
			c.t.Fatalf("the simulated chain does not seal blocks (head %d)", before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *simChain) head() *types.Header {
	c.t.Helper()
	h, err := c.client.HeaderByNumber(c.ctx, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

// testDeriver stands for the watch-only account: deterministic keys per
// index (the test never spends from them: customers pay to them). Queue
// makes the next derivations return given addresses instead.
type testDeriver struct {
	mu      sync.Mutex
	seed    string
	byIndex map[uint32]string
	queue   []string
}

func newTestDeriver(seed string) *testDeriver {
	return &testDeriver{seed: seed, byIndex: map[uint32]string{}}
}

func (d *testDeriver) Address(i uint32) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.byIndex[i]; ok {
		return a, nil // a retried activity derives the same index again
	}
	var a string
	if len(d.queue) > 0 {
		a, d.queue = d.queue[0], d.queue[1:]
	} else {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], i)
		sum := sha256.Sum256(append([]byte(d.seed), b[:]...))
		key, err := crypto.ToECDSA(sum[:])
		if err != nil {
			return "", err
		}
		a = crypto.PubkeyToAddress(key.PublicKey).Hex()
	}
	d.byIndex[i] = a
	return a, nil
}

func (d *testDeriver) enqueue(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = append(d.queue, addr)
}
