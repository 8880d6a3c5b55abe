package utxo

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/peer"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Params returns the chain parameters of network ("bitcoin" or "litecoin")
// on chain ("main", "test" or "regtest"): the peer-to-peer magic and the
// address encodings. Litecoin's are its Core's chainparams (only what the
// watcher needs: magic, bech32 prefix, P2PKH and P2SH versions).
func Params(network, chain string) (*chaincfg.Params, error) {
	var p chaincfg.Params
	switch network + "/" + chain {
	case "bitcoin/main":
		p = chaincfg.MainNetParams
	case "bitcoin/test":
		p = chaincfg.TestNet3Params
	case "bitcoin/regtest":
		p = chaincfg.RegressionNetParams
	case "litecoin/main":
		p = chaincfg.MainNetParams
		p.Name, p.Net, p.Bech32HRPSegwit, p.PubKeyHashAddrID, p.ScriptHashAddrID = "litecoin", 0xdbb6c0fb, "ltc", 0x30, 0x32
	case "litecoin/test":
		p = chaincfg.TestNet3Params
		p.Name, p.Net, p.Bech32HRPSegwit, p.PubKeyHashAddrID, p.ScriptHashAddrID = "litecoin-testnet4", 0xf1c8d2fd, "tltc", 0x6f, 0x3a
	case "litecoin/regtest":
		p = chaincfg.RegressionNetParams
		p.Name, p.Net, p.Bech32HRPSegwit, p.PubKeyHashAddrID, p.ScriptHashAddrID = "litecoin-regtest", 0xdab5bffa, "rltc", 0x6f, 0x3a
	default:
		return nil, fmt.Errorf("utxo: no parameters for %s on %q (main, test or regtest)", network, chain)
	}
	return &p, nil
}

// P2P is a chainwatch.Notifier over the node's peer-to-peer protocol (as
// BTCPay's NBXplorer does): the watcher connects as a peer, and the node
// announces its new blocks and the transactions entering its mempool. The
// node must relay to it without delay: Bitcoin/Litecoin Core trickle
// transaction announcements to ordinary inbound peers (seconds), not to
// whitelisted ones (-whitelist=noban@127.0.0.1); btcd trickles every
// --trickleinterval.
type P2P struct {
	// Addr is the node's peer-to-peer endpoint (host:port).
	Addr   string
	Params *chaincfg.Params
	// Asset is the native asset ("BTC", "LTC").
	Asset string
}

var _ chainwatch.Notifier = (*P2P)(nil)

// Run connects, completes the handshake and delivers the announcements
// until ctx ends or the connection drops.
func (c *P2P) Run(ctx context.Context, n chainwatch.Notifications) error {
	var p *peer.Peer
	var err error
	cfg := &peer.Config{
		UserAgentName:    "kernodeck-chainwatch",
		UserAgentVersion: "1",
		ChainParams:      c.Params,
		TrickleInterval:  time.Second,
		Listeners: peer.MessageListeners{
			OnInv: func(p *peer.Peer, msg *wire.MsgInv) {
				get := wire.NewMsgGetData()
				for _, iv := range msg.InvList {
					switch iv.Type {
					case wire.InvTypeBlock, wire.InvTypeWitnessBlock:
						if n.Block != nil {
							n.Block()
						}
					case wire.InvTypeTx, wire.InvTypeWitnessTx:
						// Ask for the witness serialisation: segwit
						// spends decode in full.
						_ = get.AddInvVect(wire.NewInvVect(wire.InvTypeWitnessTx, &iv.Hash))
					}
				}
				if len(get.InvList) > 0 {
					p.QueueMessage(get, nil)
				}
			},
			OnHeaders: func(*peer.Peer, *wire.MsgHeaders) {
				if n.Block != nil {
					n.Block()
				}
			},
			OnTx: func(_ *peer.Peer, msg *wire.MsgTx) {
				if n.Tx != nil {
					n.Tx(c.mempoolTx(msg))
				}
			},
		},
	}
	if p, err = peer.NewOutboundPeer(cfg, c.Addr); err != nil {
		return fmt.Errorf("p2p %s: %w", c.Addr, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("p2p %s: %w", c.Addr, err)
	}
	p.AssociateConnection(conn)
	done := make(chan struct{})
	go func() { p.WaitForDisconnect(); close(done) }()
	select {
	case <-ctx.Done():
		p.Disconnect()
		<-done
		return nil
	case <-done:
		return errors.New("p2p: node disconnected")
	}
}

// mempoolTx reads a transaction's outputs (those paying one address) and
// the outpoints it spends.
func (c *P2P) mempoolTx(tx *wire.MsgTx) chainwatch.MempoolTx {
	out := chainwatch.MempoolTx{TxID: tx.TxHash().String()}
	for i, o := range tx.TxOut {
		_, addrs, _, err := txscript.ExtractPkScriptAddrs(o.PkScript, c.Params)
		if err != nil || len(addrs) != 1 || o.Value <= 0 {
			continue
		}
		out.Outputs = append(out.Outputs, chainwatch.Output{TxID: out.TxID, Index: int64(i),
			Address: addrs[0].EncodeAddress(), Asset: c.Asset, Amount: big.NewInt(o.Value)})
	}
	for _, in := range tx.TxIn {
		out.Spends = append(out.Spends, in.PreviousOutPoint.String())
	}
	return out
}
