//go:build tools

// Package kernodeck pins dependencies while packages are being written.
package kernodeck

import (
	_ "github.com/btcsuite/btcd/btcec/v2"
	_ "github.com/btcsuite/btcd/btcutil/hdkeychain"
	_ "github.com/btcsuite/btcd/chaincfg"
	_ "github.com/btcsuite/btcd/rpcclient"
	_ "github.com/btcsuite/btcd/txscript"
	_ "github.com/ethereum/go-ethereum/ethclient"
	_ "github.com/ethereum/go-ethereum/ethclient/simulated"
	_ "github.com/ethereum/go-ethereum/crypto"
	_ "github.com/shopspring/decimal"
	_ "github.com/skip2/go-qrcode"
	_ "github.com/wneessen/go-mail"
	_ "golang.org/x/crypto/ssh"
	_ "github.com/mr-tron/base58"
	_ "github.com/tyler-smith/go-bip39"
)
