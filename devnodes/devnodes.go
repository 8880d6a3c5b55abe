// Package devnodes starts local development chains for `kernodeck dev`
// (btcd and Litecoin Core in regtest, geth in dev mode) and pays payment requests on
// them (`kernodeck dev pay`), so a newcomer sees an order paid and
// provisioned on one machine. Nothing here is used in production.
package devnodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// Development watch-only account keys, derived from BIP39's public test
// mnemonic ("abandon ... about"): never for real funds.
const (
	LitecoinRegtestXpub = "tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M" // m/84'/1'/0'
	EthereumXpub        = "xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt" // m/44'/60'/0'
)

// TestMasterFingerprint is the master key fingerprint of the test
// mnemonic, as wallets publish it.
const TestMasterFingerprint = "73c5da0a"

// TestKeyOrigin is the key origin of an account of the test mnemonic at
// path ("84'/1'/0'"), as KERNODECK_<NETWORK>_KEY_ORIGIN takes it.
func TestKeyOrigin(path string) string { return "[" + TestMasterFingerprint + "/" + path + "]" }

// Default local endpoints of the development nodes.
const (
	LitecoinRPCPort = 29443
	// LitecoinP2PPort is the node's peer-to-peer port: the watcher
	// connects there as a (whitelisted) peer for push detection.
	LitecoinP2PPort = 29444
	GethHTTPPort    = 28545
	// GethWSPort serves eth_subscribe to the watcher.
	GethWSPort = 28546
	rpcUser    = "kernodeck"
	rpcPass    = "kernodeck-dev"
	// LitecoinWallet is the funded wallet of the development node
	// (litecoin-cli -rpcwallet=dev).
	LitecoinWallet = "dev"
)

// LitecoinURL and GethURL are the nodes' RPC endpoints.
var (
	LitecoinURL = fmt.Sprintf("http://%s:%s@127.0.0.1:%d", rpcUser, rpcPass, LitecoinRPCPort)
	GethURL     = fmt.Sprintf("http://127.0.0.1:%d", GethHTTPPort)
)

// Node is a running development node.
type Node struct {
	cmd  *exec.Cmd
	done chan error
	// beforeStop runs before the node is asked to stop (btcd saves its
	// regtest chain, which it wipes when it starts).
	beforeStop func()
}

// Stop terminates the node and waits for it.
func (n *Node) Stop() {
	if n.beforeStop != nil {
		n.beforeStop()
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
	}
}

func start(name string, args []string, logPath string) (*Node, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	n := &Node{cmd: cmd, done: make(chan error, 1)}
	go func() { n.done <- cmd.Wait(); _ = log.Close() }()
	return n, nil
}

// StartLitecoin starts Litecoin Core in regtest with a funded wallet, its
// RPC on LitecoinRPCPort (LitecoinURL).
func StartLitecoin(ctx context.Context, dir string) (*Node, error) {
	return startLitecoin(ctx, dir, LitecoinRPCPort, LitecoinP2PPort)
}

// LitecoinURLOn is the RPC endpoint of a development Litecoin node on port.
func LitecoinURLOn(port int) string {
	return fmt.Sprintf("http://%s:%s@127.0.0.1:%d", rpcUser, rpcPass, port)
}

// StartLitecoinOn is StartLitecoin with the RPC on another port (tests use a
// free one; LitecoinURLOn(port) reaches it).
func StartLitecoinOn(ctx context.Context, dir string, port int) (*Node, error) {
	return startLitecoin(ctx, dir, port, 0)
}

// startLitecoin starts the node; a p2pPort of 0 means no peer-to-peer
// listener (tests on free ports).
func startLitecoin(ctx context.Context, dir string, port, p2pPort int) (*Node, error) {
	url := LitecoinURLOn(port)
	bin := "/usr/lib/litecoin/litecoind"
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("litecoind not installed (scripts/ensure-tools.sh installs it): %w", err)
	}
	data := filepath.Join(dir, "litecoin")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	listen := []string{"-listen=0"}
	if p2pPort != 0 {
		listen = []string{"-listen=1", "-bind=127.0.0.1:" + strconv.Itoa(p2pPort), "-port=" + strconv.Itoa(p2pPort),
			"-discover=0", "-dnsseed=0", "-whitelist=noban@127.0.0.1", "-mempoolreplacement=1"}
	}
	args := append([]string{"-regtest", "-datadir=" + data, "-server"}, listen...)
	args = append(args, "-rpcbind=127.0.0.1", "-rpcallowip=127.0.0.1", "-rpcport="+strconv.Itoa(port),
		"-rpcuser="+rpcUser, "-rpcpassword="+rpcPass, "-txindex=1", "-fallbackfee=0.0001")
	n, err := start(bin, args, filepath.Join(dir, "litecoind.log"))
	if err != nil {
		return nil, err
	}
	if err := waitRPC(ctx, url, "getblockchaininfo", n); err != nil {
		n.Stop()
		return nil, err
	}
	// A wallet (created once, loaded after) with mature coins to pay with.
	if err := RPC(ctx, url, "createwallet", []any{LitecoinWallet}, nil); err != nil {
		_ = RPC(ctx, url, "loadwallet", []any{LitecoinWallet}, nil)
	}
	var height int64
	if err := RPC(ctx, url, "getblockcount", nil, &height); err != nil {
		n.Stop()
		return nil, err
	}
	if height < 101 {
		if err := MineLitecoin(ctx, url, 101); err != nil {
			n.Stop()
			return nil, err
		}
	}
	return n, nil
}

// MineLitecoin mines blocks on the development Litecoin node at url.
func MineLitecoin(ctx context.Context, url string, blocks int) error {
	var addr string
	if err := RPC(ctx, url, "getnewaddress", nil, &addr); err != nil {
		return err
	}
	return RPC(ctx, url, "generatetoaddress", []any{blocks, addr}, nil)
}

// StartGeth starts geth in dev mode (in memory, one block a second, the
// funded dev account unlocked).
func StartGeth(ctx context.Context, dir string) (*Node, error) {
	return startGeth(ctx, dir, GethHTTPPort, GethWSPort)
}

// GethURLOn is the RPC endpoint of a development geth on port.
func GethURLOn(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// StartGethOn is StartGeth with the HTTP RPC on another port and no
// websocket (tests use a free port; GethURLOn(port) reaches it).
func StartGethOn(ctx context.Context, dir string, port int) (*Node, error) {
	return startGeth(ctx, dir, port, 0)
}

// startGeth starts geth --dev; a wsPort of 0 means no websocket.
func startGeth(ctx context.Context, dir string, port, wsPort int) (*Node, error) {
	bin, err := goTool("geth")
	if err != nil {
		return nil, err
	}
	args := []string{"--dev", "--dev.period", "1", "--ipcdisable", "--nodiscover", "--maxpeers=0",
		"--port=0", "--authrpc.port=0", "--http", "--http.addr=127.0.0.1", "--http.port=" + strconv.Itoa(port),
		"--http.api=eth,net,web3"}
	if wsPort != 0 {
		args = append(args, "--ws", "--ws.addr=127.0.0.1", "--ws.port="+strconv.Itoa(wsPort), "--ws.api=eth")
	}
	n, err := start(bin, args, filepath.Join(dir, "geth.log"))
	if err != nil {
		return nil, err
	}
	if err := waitRPC(ctx, GethURLOn(port), "eth_blockNumber", n); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// SendEther sends wei from the funded, unlocked dev account of the geth
// --dev node at url to address, and returns the transaction's hash (geth
// --dev mines it within its period: confirmations follow).
func SendEther(ctx context.Context, url, to string, wei *big.Int) (string, error) {
	var accounts []string
	if err := RPC(ctx, url, "eth_accounts", nil, &accounts); err != nil || len(accounts) == 0 {
		return "", fmt.Errorf("geth dev account: %v", err)
	}
	var hash string
	err := RPC(ctx, url, "eth_sendTransaction", []any{map[string]string{
		"from": accounts[0], "to": to, "value": "0x" + wei.Text(16),
	}}, &hash)
	return hash, err
}

func waitRPC(ctx context.Context, url, method string, n *Node) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := RPC(ctx, url, method, nil, nil)
		if err == nil {
			return nil
		}
		select {
		case e := <-n.done:
			return fmt.Errorf("node exited: %v", e)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node RPC at %s: %w", url, err)
		}
	}
}

// RPC makes one JSON-RPC 1.0/2.0 call (also used by tests that run their
// own node), answered within 30 s.
func RPC(ctx context.Context, url, method string, params []any, out any) error {
	return RPCWithin(ctx, 30*time.Second, url, method, params, out)
}

// RPCWithin is RPC with the time the node has to answer (a sendmany of
// thousands of outputs takes minutes).
func RPCWithin(ctx context.Context, timeout time.Duration, url, method string, params []any, out any) error {
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: %s: %w", method, resp.Status, err)
	}
	if r.Error != nil {
		return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
	}
	if out != nil {
		return json.Unmarshal(r.Result, out)
	}
	return nil
}

// PayLitecoin sends exactly the intent's amount from the development wallet
// of the Litecoin node at url, then mines confirmations blocks.
func PayLitecoin(ctx context.Context, url string, in domain.Intent, confirmations int) (string, error) {
	var txid string
	amount := domain.FormatUnits(&in.AmountBase.Int, in.Decimals)
	if err := RPC(ctx, url, "sendtoaddress", []any{in.Address, json.Number(amount)}, &txid); err != nil {
		return "", err
	}
	return txid, MineLitecoin(ctx, url, confirmations)
}

// Pay sends exactly the intent's amount to its address on the local chain
// and mines enough blocks to confirm it. It returns the transaction id.
func Pay(ctx context.Context, in domain.Intent, confirmations int) (string, error) {
	switch {
	case in.Network == domain.NetworkLitecoin:
		return PayLitecoin(ctx, LitecoinURL, in, confirmations)
	case in.Network == domain.NetworkBitcoin:
		return PayBitcoin(ctx, BitcoinURL, in, confirmations)
	case in.Network == domain.NetworkEthereum && in.Asset == "ETH":
		return SendEther(ctx, GethURL, in.Address, &in.AmountBase.Int)
	default:
		return "", errors.New("dev pay supports BTC on the local btcd regtest, LTC on the local Litecoin regtest and ETH on the local geth only")
	}
}

// FreePort returns a loopback port free at the time of the call, for nodes
// started on other ports than the defaults (tests).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// goTool finds a node that scripts/ensure-tools.sh installs with go
// install: on PATH, else in ~/go/bin.
func goTool(name string) (string, error) {
	if bin, err := exec.LookPath(name); err == nil {
		return bin, nil
	}
	home, _ := os.UserHomeDir()
	bin := filepath.Join(home, "go", "bin", name)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s not installed (scripts/ensure-tools.sh installs it)", name)
	}
	return bin, nil
}
