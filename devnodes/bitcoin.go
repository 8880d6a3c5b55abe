package devnodes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/domain"
)

// Local endpoints of the development Bitcoin node (btcd in regtest).
const (
	BitcoinRPCPort = 29332
	// BitcoinP2PPort is where the watcher connects as a peer for push
	// detection.
	BitcoinP2PPort = 29333
	// BitcoinRegtestXpub is m/84'/1'/0' of the test mnemonic: test networks
	// share coin type 1, so it is the Litecoin regtest key, with Bitcoin's
	// regtest addresses (bcrt1...).
	BitcoinRegtestXpub = LitecoinRegtestXpub
	// segwitBlocks: btcd's regtest activates segwit through BIP9, three
	// 144-block windows, before a witness spend is accepted.
	segwitBlocks = 440
	// devFee is the fee of a development payment, in satoshis.
	devFee = 10_000
)

// BitcoinURL is the development Bitcoin node's RPC endpoint.
var BitcoinURL = BitcoinURLOn(BitcoinRPCPort)

// BitcoinURLOn is the RPC endpoint of a development Bitcoin node on port.
func BitcoinURLOn(port int) string {
	return fmt.Sprintf("http://%s:%s@127.0.0.1:%d", rpcUser, rpcPass, port)
}

// payer is the key btcd mines to and `dev pay` spends from: btcd has no
// wallet. It is derived from a public string: regtest coins only.
type payer struct {
	key    *btcec.PrivateKey
	script []byte // its P2WPKH output script
	addr   string
}

func devPayer() (payer, error) {
	seed := sha256.Sum256([]byte("kernodeck development bitcoin payer (regtest only)"))
	key, _ := btcec.PrivKeyFromBytes(seed[:])
	addr, err := btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(key.PubKey().SerializeCompressed()), &chaincfg.RegressionNetParams)
	if err != nil {
		return payer{}, err
	}
	script, err := txscript.PayToAddrScript(addr)
	if err != nil {
		return payer{}, err
	}
	return payer{key: key, script: script, addr: addr.EncodeAddress()}, nil
}

// StartBitcoin starts btcd in regtest, its RPC on BitcoinRPCPort
// (BitcoinURL) and its peer-to-peer port on BitcoinP2PPort, with mature
// coins of the development payer.
func StartBitcoin(ctx context.Context, dir string) (*Node, error) {
	return startBitcoin(ctx, dir, BitcoinRPCPort, BitcoinP2PPort)
}

// StartBitcoinOn is StartBitcoin with the RPC on port and the peer-to-peer
// listener on p2pPort (tests use free ones).
func StartBitcoinOn(ctx context.Context, dir string, port, p2pPort int) (*Node, error) {
	return startBitcoin(ctx, dir, port, p2pPort)
}

func startBitcoin(ctx context.Context, dir string, port, p2pPort int) (*Node, error) {
	bin, err := goTool("btcd")
	if err != nil {
		return nil, err
	}
	p, err := devPayer()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "btcd")
	n, err := start(bin, []string{"--regtest", "--configfile=", "--datadir=" + filepath.Join(data, "data"),
		"--logdir=" + filepath.Join(data, "logs"), "--listen=127.0.0.1:" + strconv.Itoa(p2pPort), "--trickleinterval=50ms",
		"--rpclisten=127.0.0.1:" + strconv.Itoa(port), "--notls", "--rpcuser=" + rpcUser, "--rpcpass=" + rpcPass,
		"--miningaddr=" + p.addr, "--txindex"}, filepath.Join(dir, "btcd.log"))
	if err != nil {
		return nil, err
	}
	url := BitcoinURLOn(port)
	if err := waitRPC(ctx, url, "getblockcount", n); err != nil {
		n.Stop()
		return nil, err
	}
	// btcd removes its regtest database at every start: the chain saved
	// when it last stopped is submitted again, block by block (the same
	// blocks, so the same hashes: no payment seen before is reorganised
	// away), and saved again at the next stop.
	chainFile := filepath.Join(data, "regtest-chain.hex")
	if err := restoreBitcoinChain(ctx, url, chainFile); err != nil {
		n.Stop()
		return nil, err
	}
	n.beforeStop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := saveBitcoinChain(sctx, url, chainFile); err != nil {
			fmt.Fprintf(os.Stderr, "devnodes: the regtest chain was not saved (%v): the next start begins a new one\n", err)
		}
	}
	var height int
	if err := RPC(ctx, url, "getblockcount", nil, &height); err != nil {
		n.Stop()
		return nil, err
	}
	if height < segwitBlocks {
		if _, err := MineBitcoin(ctx, url, segwitBlocks-height); err != nil {
			n.Stop()
			return nil, err
		}
	}
	return n, nil
}

// saveBitcoinChain writes every block of the node's chain, raw, one per
// line from height 1, to file (through a temporary file: a save cut short
// leaves the previous one).
func saveBitcoinChain(ctx context.Context, url, file string) error {
	var height int
	if err := RPC(ctx, url, "getblockcount", nil, &height); err != nil {
		return err
	}
	var b strings.Builder
	for h := 1; h <= height; h++ {
		var hash, raw string
		if err := RPC(ctx, url, "getblockhash", []any{h}, &hash); err != nil {
			return err
		}
		if err := RPC(ctx, url, "getblock", []any{hash, 0}, &raw); err != nil {
			return err
		}
		b.WriteString(raw + "\n")
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// restoreBitcoinChain submits the blocks saved in file (none if it does
// not exist) to a node whose chain is empty.
func restoreBitcoinChain(ctx context.Context, url, file string) error {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var height int
	if err := RPC(ctx, url, "getblockcount", nil, &height); err != nil {
		return err
	}
	if height > 0 {
		return nil // the node kept its chain
	}
	for i, raw := range strings.Fields(string(data)) {
		var refused *string
		if err := RPC(ctx, url, "submitblock", []any{raw}, &refused); err != nil {
			return fmt.Errorf("restore the regtest chain from %s, block %d: %w", file, i+1, err)
		}
		if refused != nil && *refused != "" && *refused != "duplicate" {
			return fmt.Errorf("restore the regtest chain from %s: block %d refused: %s (remove the file to start a new chain)", file, i+1, *refused)
		}
	}
	return nil
}

// PayBitcoin sends exactly the intent's amount to its address from a
// mature, unspent coinbase of the development payer on the btcd at url
// (the change back to the payer), then mines confirmations blocks.
func PayBitcoin(ctx context.Context, url string, in domain.Intent, confirmations int) (string, error) {
	if !in.AmountBase.IsInt64() {
		return "", fmt.Errorf("amount %s out of range", in.Amount)
	}
	txid, err := SendBitcoin(ctx, url, []BitcoinOutput{{Address: in.Address, Sats: in.AmountBase.Int64()}})
	if err != nil {
		return "", err
	}
	_, err = MineBitcoin(ctx, url, confirmations)
	return txid, err
}

// BitcoinOutput is one output of a development payment.
type BitcoinOutput struct {
	Address string // regtest address (bcrt1...)
	Sats    int64
}

// SendBitcoin pays every output in one transaction, from one mature,
// unspent coinbase of the development payer on the btcd at url (the change
// back to the payer), and broadcasts it without mining. It returns the
// transaction id.
func SendBitcoin(ctx context.Context, url string, outs []BitcoinOutput) (string, error) {
	p, err := devPayer()
	if err != nil {
		return "", err
	}
	// 1 sat/byte covers each output's ~31 bytes (btcd's relay minimum).
	fee := devFee + 50*int64(len(outs))
	total := fee
	tx := wire.NewMsgTx(2)
	for _, o := range outs {
		to, err := btcutil.DecodeAddress(o.Address, &chaincfg.RegressionNetParams)
		if err != nil {
			return "", fmt.Errorf("address %s: %w", o.Address, err)
		}
		toScript, err := txscript.PayToAddrScript(to)
		if err != nil {
			return "", err
		}
		tx.AddTxOut(wire.NewTxOut(o.Sats, toScript))
		total += o.Sats
	}
	op, value, err := spendableCoin(ctx, url, p, total)
	if err != nil {
		return "", err
	}
	tx.AddTxIn(wire.NewTxIn(&op, nil, nil))
	tx.AddTxOut(wire.NewTxOut(value-total, p.script))
	fetcher := txscript.NewCannedPrevOutputFetcher(p.script, value)
	wit, err := txscript.WitnessSignature(tx, txscript.NewTxSigHashes(tx, fetcher), 0, value, p.script, txscript.SigHashAll, p.key, true)
	if err != nil {
		return "", err
	}
	tx.TxIn[0].Witness = wit
	var buf bytes.Buffer
	if err := tx.Serialize(&buf); err != nil {
		return "", err
	}
	var txid string
	if err := RPC(ctx, url, "sendrawtransaction", []any{hex.EncodeToString(buf.Bytes())}, &txid); err != nil {
		return "", err
	}
	return txid, nil
}

// MineBitcoin mines blocks on the btcd at url (to the development payer,
// its --miningaddr) and returns their hashes.
func MineBitcoin(ctx context.Context, url string, blocks int) ([]string, error) {
	var hashes []string
	err := RPC(ctx, url, "generate", []any{blocks}, &hashes)
	return hashes, err
}

// BitcoinPayerAddress is the development payer's address: the --miningaddr
// of a btcd whose coins SendBitcoin spends.
func BitcoinPayerAddress() (string, error) {
	p, err := devPayer()
	return p.addr, err
}

// spendableCoin finds a coinbase of the payer with 100 confirmations or
// more, unspent (mempool included) and worth at least need satoshis.
func spendableCoin(ctx context.Context, url string, p payer, need int64) (wire.OutPoint, int64, error) {
	var tip int64
	if err := RPC(ctx, url, "getblockcount", nil, &tip); err != nil {
		return wire.OutPoint{}, 0, err
	}
	// gettxout on btcd does not see a coin spent by a transaction still in
	// the mempool: those coins are skipped here.
	inMempool, err := mempoolSpends(ctx, url)
	if err != nil {
		return wire.OutPoint{}, 0, err
	}
	for h := int64(1); h <= tip-100; h++ {
		var hash string
		if err := RPC(ctx, url, "getblockhash", []any{h}, &hash); err != nil {
			return wire.OutPoint{}, 0, err
		}
		var block struct {
			Tx []string `json:"tx"`
		}
		if err := RPC(ctx, url, "getblock", []any{hash, 1}, &block); err != nil {
			return wire.OutPoint{}, 0, err
		}
		if len(block.Tx) == 0 {
			continue
		}
		var out *struct {
			Value        float64 `json:"value"`
			ScriptPubKey struct {
				Hex string `json:"hex"`
			} `json:"scriptPubKey"`
		}
		if err := RPC(ctx, url, "gettxout", []any{block.Tx[0], 0, true}, &out); err != nil {
			return wire.OutPoint{}, 0, err
		}
		if out == nil || out.ScriptPubKey.Hex != hex.EncodeToString(p.script) || inMempool[block.Tx[0]+":0"] {
			continue // spent, or mined to another key
		}
		value, err := btcutil.NewAmount(out.Value)
		if err != nil || int64(value) < need {
			continue
		}
		txHash, err := chainhash.NewHashFromStr(block.Tx[0])
		if err != nil {
			return wire.OutPoint{}, 0, err
		}
		return wire.OutPoint{Hash: *txHash, Index: 0}, int64(value), nil
	}
	return wire.OutPoint{}, 0, errors.New("no mature coin of the development payer left: mine more blocks (generate 100)")
}

// mempoolSpends lists the outputs ("txid:index") spent by the transactions
// in the node's mempool.
func mempoolSpends(ctx context.Context, url string) (map[string]bool, error) {
	var pool []string
	if err := RPC(ctx, url, "getrawmempool", nil, &pool); err != nil {
		return nil, err
	}
	spent := map[string]bool{}
	for _, txid := range pool {
		var tx struct {
			Vin []struct {
				TxID string `json:"txid"`
				Vout int    `json:"vout"`
			} `json:"vin"`
		}
		if err := RPC(ctx, url, "getrawtransaction", []any{txid, 1}, &tx); err != nil {
			continue // mined or replaced meanwhile
		}
		for _, in := range tx.Vin {
			spent[fmt.Sprintf("%s:%d", in.TxID, in.Vout)] = true
		}
	}
	return spent, nil
}
