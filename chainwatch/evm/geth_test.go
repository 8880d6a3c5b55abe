package evm_test

import (
	"context"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/kernodeck/kernodeck/chainwatch"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
)

// gethDevKey is the fixed, funded developer account of geth --dev.
const gethDevKey = "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"

// startGethDev runs geth --dev in memory on free loopback ports and returns
// its HTTP RPC URL and its websocket URL. It skips the test when geth is not
// installed.
func startGethDev(t *testing.T) (string, string) {
	t.Helper()
	bin := os.Getenv("KERNODECK_GETH")
	if bin == "" {
		gopath, err := exec.Command("go", "env", "GOPATH").Output()
		if err != nil {
			t.Skipf("go env GOPATH: %v", err)
		}
		bin = filepath.Join(string(gopath[:len(gopath)-1]), "bin", "geth")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("geth not installed (scripts/ensure-tools.sh): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	wsPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logf, err := os.Create(filepath.Join(t.TempDir(), "geth.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--dev", "--ipcdisable", "--nodiscover", "--maxpeers=0", "--port=0", "--authrpc.port=0",
		"--http", "--http.addr=127.0.0.1", "--http.port="+strconv.Itoa(port), "--http.api=eth,net,web3",
		"--ws", "--ws.addr=127.0.0.1", "--ws.port="+strconv.Itoa(wsPort), "--ws.api=eth")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		c, err := ethclient.Dial(url)
		if err == nil {
			_, err = c.ChainID(context.Background())
			c.Close()
			if err == nil {
				return url, "ws://127.0.0.1:" + strconv.Itoa(wsPort)
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("geth --dev does not answer on %s: %v (log %s)", url, err, logf.Name())
		}
	}
}

// gethChain is a simChain driving a geth --dev node over HTTP, signing with
// its funded developer key.
func gethChain(t *testing.T, ctx context.Context, url string) *simChain {
	t.Helper()
	client, err := ethclient.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	key, err := crypto.HexToECDSA(gethDevKey)
	if err != nil {
		t.Fatal(err)
	}
	return &simChain{
		t: t, ctx: ctx, client: client, key: key, from: crypto.PubkeyToAddress(key.PublicKey),
		signer: types.LatestSignerForChainID(big.NewInt(1337)), tokens: map[string]common.Address{},
	}
}

// TestGethDev follows a real geth --dev node over HTTP JSON-RPC: the Chain
// dialled from its URL (chain ID checked) finds an ETH transfer and a USDC
// Transfer log, and leaves a failed token transfer out.
func TestGethDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts geth")
	}
	ctx := context.Background()
	url, _ := startGethDev(t)
	sc := gethChain(t, ctx, url)
	sc.tokens["USDC"] = sc.deployToken("USDC")
	ch, err := evm.New(ctx, evm.Config{RPCURL: url, ChainID: 1337, Tokens: sc.tokenConfig(false)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)

	to := newAddr(t)
	ethTx := sc.send(&to, big.NewInt(123_456_789), nil, 0)
	usdcTx := sc.payToken("USDC", to, big.NewInt(23_570_000), 0)
	failed := sc.payToken("USDC", to, new(big.Int).Lsh(big.NewInt(1), 200), 100_000)
	heights := map[int64]bool{}
	for _, tx := range []*types.Transaction{ethTx, usdcTx, failed} {
		heights[sc.receipt(tx).BlockNumber.Int64()] = true
	}
	if r := sc.receipt(failed); r.Status != types.ReceiptStatusFailed {
		t.Fatal("the oversized transfer did not fail")
	}
	tip, err := ch.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for h := range heights {
		if h > tip {
			t.Fatalf("receipt at %d above the tip %d", h, tip)
		}
		b, err := ch.Block(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range b.Outputs {
			if o.Address == to.Hex() {
				found[o.Asset] = o.Amount.String() + "@" + o.TxID
			}
		}
	}
	want := map[string]string{
		"ETH":  "123456789@" + ethTx.Hash().Hex(),
		"USDC": "23570000@" + usdcTx.Hash().Hex(),
	}
	if len(found) != len(want) || found["ETH"] != want["ETH"] || found["USDC"] != want["USDC"] {
		t.Fatalf("found %v, want %v", found, want)
	}
}

// TestGethNewHeadsWakeTheWatcher: eth_subscribe("newHeads") over geth's
// websocket reports each new block (geth --dev seals one per transaction).
func TestGethNewHeadsWakeTheWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("starts geth")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, ws := startGethDev(t)
	sc := gethChain(t, ctx, url)
	blocks := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- (&evm.Heads{URL: ws}).Run(ctx, chainwatch.Notifications{Block: func() { blocks <- struct{}{} }})
	}()
	// The subscription may start after the first block: send until one is
	// reported, then check the next one is too.
	to := newAddr(t)
	deadline := time.Now().Add(time.Minute)
	for got := 0; got < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d new heads reported in a minute", got)
		}
		tx := sc.send(&to, big.NewInt(1), nil, 0)
		sc.receipt(tx)
		select {
		case <-blocks:
			got++
		case err := <-done:
			t.Fatalf("subscription ended: %v", err)
		case <-time.After(10 * time.Second):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}
