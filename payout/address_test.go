package payout_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"filippo.io/edwards25519"
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/mr-tron/base58"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payout"
)

// Litecoin's address parameters (Litecoin Core's chainparams.cpp), for
// btcutil to encode addresses with: btcutil computes the checksums.
var (
	ltcMain    = params(&chaincfg.MainNetParams, "ltc", 0x30, 0x32)
	ltcRegtest = params(&chaincfg.RegressionNetParams, "rltc", 0x6f, 0x3a)
)

func params(base *chaincfg.Params, hrp string, pkh, sh byte) *chaincfg.Params {
	p := *base
	p.Bech32HRPSegwit, p.PubKeyHashAddrID, p.ScriptHashAddrID = hrp, pkh, sh
	return &p
}

// addrs holds one address of each standard kind, made by btcutil from a
// fresh key.
type addrs struct{ p2pkh, p2sh, p2wpkh, p2wsh, p2tr string }

func btcAddresses(t testing.TB, p *chaincfg.Params) addrs {
	t.Helper()
	key, err := btcec.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := key.PubKey().SerializeCompressed()
	var a addrs
	must := func(addr btcutil.Address, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return addr.EncodeAddress()
	}
	a.p2pkh = must(btcutil.NewAddressPubKeyHash(btcutil.Hash160(pub), p))
	a.p2sh = must(btcutil.NewAddressScriptHash(pub, p))
	a.p2wpkh = must(btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(pub), p))
	h := sha256.Sum256(pub)
	a.p2wsh = must(btcutil.NewAddressWitnessScriptHash(h[:], p))
	a.p2tr = must(btcutil.NewAddressTaproot(schnorr.SerializePubKey(txscript.ComputeTaprootKeyNoScript(key.PubKey())), p))
	return a
}

func ethAddress(t *testing.T) string {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(key.PublicKey).Hex() // EIP-55, by go-ethereum
}

// solanaATA is the associated token account of wallet for mint, derived
// as Solana's find_program_address does: the first bump from 255 down
// whose hash is off the curve. Customers paste this instead of their
// wallet address.
func solanaATA(t *testing.T, wallet, mint []byte) string {
	t.Helper()
	tokenProgram, _ := base58.Decode("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
	ataProgram, _ := base58.Decode("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")
	for bump := 255; bump >= 0; bump-- {
		h := sha256.New()
		for _, b := range [][]byte{wallet, tokenProgram, mint, {byte(bump)}, ataProgram, []byte("ProgramDerivedAddress")} {
			h.Write(b)
		}
		sum := h.Sum(nil)
		if _, err := new(edwards25519.Point).SetBytes(sum); err != nil {
			return base58.Encode(sum)
		}
	}
	t.Fatal("no bump")
	return ""
}

// flipCase changes the case of the first letter after 0x: a mixed-case
// address whose EIP-55 checksum no longer matches.
func flipCase(s string) string {
	b := []byte(s)
	for i := 2; i < len(b); i++ {
		switch {
		case b[i] >= 'a' && b[i] <= 'f':
			b[i] -= 'a' - 'A'
			return string(b)
		case b[i] >= 'A' && b[i] <= 'F':
			b[i] += 'a' - 'A'
			return string(b)
		}
	}
	return s
}

// base58Typo changes one character of a base58 address into another of
// the alphabet: the checksum catches it.
func base58Typo(s string) string {
	i := len(s) / 2
	c := byte('2')
	if s[i] == '2' {
		c = '3'
	}
	return s[:i] + string(c) + s[i+1:]
}

func method(asset, network string) domain.Method {
	m, _ := domain.LookupMethod(asset, network)
	return m
}

const (
	usdtEthereum = "0xdAC17F958D2ee523a2206206994597C13D831ec7"
	usdtTron     = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
)

func checker(own ...string) payout.Addresses {
	return payout.Addresses{
		Tokens: map[string]map[string]string{
			"ethereum": {"USDT": usdtEthereum},
			"tron":     {"USDT": usdtTron},
		},
		Own: payout.OwnAddressesFunc(func(_ context.Context, _, address string) (bool, error) {
			for _, o := range own {
				if o == address {
					return true, nil
				}
			}
			return false, nil
		}),
	}
}

func TestCheckAcceptsEachNetwork(t *testing.T) {
	ctx := context.Background()
	btc := btcAddresses(t, &chaincfg.MainNetParams)
	ltc := btcAddresses(t, ltcMain)
	ltcR := btcAddresses(t, ltcRegtest)
	eth := ethAddress(t)
	solPub, _, _ := ed25519.GenerateKey(nil)
	sol := base58.Encode(solPub)
	tronKey, _ := crypto.GenerateKey()
	tron := hdwallet.TronAddressFromEVM(crypto.PubkeyToAddress(tronKey.PublicKey))
	cases := []struct {
		m         domain.Method
		networks  map[string]string
		in, want  string
		scriptAny bool
	}{
		{m: method("BTC", "bitcoin"), in: btc.p2pkh, want: btc.p2pkh},
		{m: method("BTC", "bitcoin"), in: btc.p2sh, want: btc.p2sh},
		{m: method("BTC", "bitcoin"), in: btc.p2wpkh, want: btc.p2wpkh},
		{m: method("BTC", "bitcoin"), in: strings.ToUpper(btc.p2wpkh), want: btc.p2wpkh},
		{m: method("BTC", "bitcoin"), in: btc.p2wsh, want: btc.p2wsh},
		{m: method("BTC", "bitcoin"), in: btc.p2tr, want: btc.p2tr},
		{m: method("BTC", "bitcoin"), in: "  " + btc.p2tr + "\n", want: btc.p2tr},
		{m: method("LTC", "litecoin"), in: ltc.p2pkh, want: ltc.p2pkh},
		{m: method("LTC", "litecoin"), in: ltc.p2sh, want: ltc.p2sh},
		{m: method("LTC", "litecoin"), in: ltc.p2wpkh, want: ltc.p2wpkh},
		{m: method("LTC", "litecoin"), in: ltc.p2tr, want: ltc.p2tr},
		{m: method("LTC", "litecoin"), networks: map[string]string{"litecoin": "litecoin-regtest"}, in: ltcR.p2wpkh, want: ltcR.p2wpkh},
		{m: method("LTC", "litecoin"), networks: map[string]string{"litecoin": "litecoin-regtest"}, in: ltcR.p2sh, want: ltcR.p2sh},
		{m: method("ETH", "ethereum"), in: eth, want: eth},
		{m: method("ETH", "ethereum"), in: strings.ToLower(eth), want: eth},
		{m: method("USDC", "ethereum"), in: eth, want: eth},
		{m: method("TRX", "tron"), in: tron, want: tron},
		{m: method("USDT", "tron"), in: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", want: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"}, // Ledger's app-tron README
		{m: method("SOL", "solana"), in: sol, want: sol},
	}
	for _, c := range cases {
		v := checker()
		v.Networks = c.networks
		got, err := v.Check(ctx, c.m, c.in)
		if err != nil {
			t.Errorf("%s/%s %q: %v", c.m.Asset, c.m.Network, c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s/%s %q: canonical %q, want %q", c.m.Asset, c.m.Network, c.in, got, c.want)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	ctx := context.Background()
	btc := btcAddresses(t, &chaincfg.MainNetParams)
	btcTest := btcAddresses(t, &chaincfg.TestNet3Params)
	ltc := btcAddresses(t, ltcMain)
	eth := ethAddress(t)
	solPub, _, _ := ed25519.GenerateKey(nil)
	sol := base58.Encode(solPub)
	usdcMint, _ := base58.Decode("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
	ata := solanaATA(t, solPub, usdcMint)
	tron := hdwallet.TronAddressFromEVM(crypto.PubkeyToAddress(mustKey(t).PublicKey))
	// A Litecoin 3... address: Bitcoin's P2SH version byte, which Litecoin
	// Core still decodes.
	ltcLegacyP2SH := btc.p2sh
	// A witness v2 program (BIP350's valid test vector, on Bitcoin).
	const v2 = "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs"
	mainLTC := method("LTC", "litecoin")

	cases := []struct {
		name    string
		m       domain.Method
		in      string
		reason  error
		message string // a fragment of the French message
	}{
		{"empty", method("BTC", "bitcoin"), " ", payout.ErrAddressFormat, "n'est pas une adresse Bitcoin valide"},
		{"too long", method("BTC", "bitcoin"), strings.Repeat("bc1q", 30), payout.ErrAddressFormat, "Bitcoin"},
		{"bech32 typo", method("BTC", "bitcoin"), btc.p2wpkh[:len(btc.p2wpkh)-1] + map[bool]string{true: "q", false: "p"}[!strings.HasSuffix(btc.p2wpkh, "q")], payout.ErrAddressChecksum, "mal copié"},
		{"base58 typo", method("BTC", "bitcoin"), base58Typo(btc.p2pkh), payout.ErrAddressChecksum, "mal copié"},
		{"testnet on mainnet", method("BTC", "bitcoin"), btcTest.p2wpkh, payout.ErrAddressFormat, "adresse Bitcoin (testnet), pas Bitcoin"},
		{"Litecoin on Bitcoin", method("BTC", "bitcoin"), ltc.p2wpkh, payout.ErrAddressFormat, "adresse Litecoin, pas Bitcoin"},
		{"Bitcoin on Litecoin", mainLTC, btc.p2wpkh, payout.ErrAddressFormat, "adresse Bitcoin, pas Litecoin"},
		{"Bitcoin P2PKH on Litecoin", mainLTC, btc.p2pkh, payout.ErrAddressFormat, "adresse Bitcoin, pas Litecoin"},
		{"Litecoin 3...", mainLTC, ltcLegacyP2SH, payout.ErrAddressAmbiguous, "commence par M, Q ou ltc1"},
		{"MWEB", mainLTC, "ltcmweb1qq0abc", payout.ErrAddressFormat, "MWEB"},
		{"witness v2", method("BTC", "bitcoin"), v2, payout.ErrAddressUnspendable, "SegWit"},
		{"EIP-55 mismatch", method("ETH", "ethereum"), flipCase(eth), payout.ErrAddressChecksum, "mal copié"},
		{"no 0x", method("ETH", "ethereum"), eth[2:], payout.ErrAddressFormat, "Ethereum valide"},
		{"zero address", method("ETH", "ethereum"), "0x0000000000000000000000000000000000000000", payout.ErrAddressUnspendable, "destruction"},
		{"token contract", method("ETH", "ethereum"), usdtEthereum, payout.ErrAddressContract, "contrat du jeton USDT"},
		{"token contract lowercase", method("USDC", "ethereum"), strings.ToLower(usdtEthereum), payout.ErrAddressContract, "USDT"},
		{"Tron on Ethereum", method("ETH", "ethereum"), tron, payout.ErrAddressFormat, "adresse Tron, pas Ethereum"},
		{"Ethereum on Tron", method("TRX", "tron"), eth, payout.ErrAddressFormat, "adresse Ethereum, pas Tron"},
		{"Tron typo", method("TRX", "tron"), base58Typo(tron), payout.ErrAddressChecksum, "Tron"},
		{"Tron zero", method("TRX", "tron"), hdwallet.TronAddressFromEVM([20]byte{}), payout.ErrAddressUnspendable, "destruction"},
		{"TRC-20 contract", method("USDT", "tron"), usdtTron, payout.ErrAddressContract, "USDT"},
		{"Solana token account", method("SOL", "solana"), ata, payout.ErrAddressUnspendable, "compte de programme ou de jeton"},
		{"Solana system program", method("SOL", "solana"), "11111111111111111111111111111111", payout.ErrAddressUnspendable, "destruction"},
		{"Solana 31 bytes", method("SOL", "solana"), base58.Encode(solPub[:31]), payout.ErrAddressFormat, "Solana valide"},
		{"Solana on Tron", method("TRX", "tron"), sol, payout.ErrAddressFormat, "adresse Solana, pas Tron"},
		{"unknown method", domain.Method{Asset: "DOGE", Network: "dogecoin"}, sol, payout.ErrMethod, "n'existe pas"},
		{"USDC on Tron", domain.Method{Asset: "USDC", Network: "tron"}, tron, payout.ErrMethod, "n'existe pas"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := checker().Check(ctx, c.m, c.in)
			if !errors.Is(err, c.reason) {
				t.Fatalf("err = %v, want %v", err, c.reason)
			}
			if domain.ErrorCode(err) != domain.ECodeInvalid {
				t.Errorf("code %q, want %q", domain.ErrorCode(err), domain.ECodeInvalid)
			}
			msg := domain.ErrorMessage(err)
			if !strings.Contains(msg, c.message) {
				t.Errorf("message %q lacks %q", msg, c.message)
			}
			if len(c.in) > 8 && strings.Contains(msg, strings.TrimSpace(c.in)) {
				t.Errorf("message repeats the address: %q", msg)
			}
		})
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestCheckOwnAddresses: the shop's own addresses are refused in their
// canonical form whatever the customer's spelling, and a failing store
// is an error of the server's, not a refusal.
func TestCheckOwnAddresses(t *testing.T) {
	ctx := context.Background()
	acct, err := hdwallet.ParseAccountKey(hdwallet.LitecoinRegtest, ltcRegtestTpub)
	if err != nil {
		t.Fatal(err)
	}
	deposit, _ := acct.Address(3)
	change, _ := acct.InternalAddress(0)
	eth := ethAddress(t)
	v := checker(deposit, change, eth)
	v.Networks = map[string]string{"litecoin": "litecoin-regtest"}
	for _, c := range []struct {
		m  domain.Method
		in string
	}{
		{method("LTC", "litecoin"), deposit},
		{method("LTC", "litecoin"), strings.ToUpper(change)},
		{method("ETH", "ethereum"), strings.ToLower(eth)},
		{method("USDT", "ethereum"), eth},
	} {
		_, err := v.Check(ctx, c.m, c.in)
		if !errors.Is(err, payout.ErrAddressOwn) || !strings.Contains(domain.ErrorMessage(err), "appartient à Kernodeck") {
			t.Errorf("%s %s: err = %v, want ErrAddressOwn", c.m.Network, c.in, err)
		}
	}
	other, _ := acct.Address(4)
	if got, err := v.Check(ctx, method("LTC", "litecoin"), other); err != nil || got != other {
		t.Errorf("another address: %q, %v", got, err)
	}

	down := errors.New("database down")
	v.Own = payout.OwnAddressesFunc(func(context.Context, string, string) (bool, error) { return false, down })
	if _, err := v.Check(ctx, method("LTC", "litecoin"), other); !errors.Is(err, down) || domain.ErrorCode(err) != domain.ECodeInternal {
		t.Errorf("store failure: err = %v (code %s), want it wrapped as internal", err, domain.ErrorCode(err))
	}
	v.Own = nil
	if _, err := v.Check(ctx, method("LTC", "litecoin"), other); err == nil {
		t.Error("no own-address check: accepted")
	}
}

// ltcRegtestTpub is the development Litecoin regtest account m/84'/1'/0'
// of BIP39's "abandon ... about" mnemonic (devnodes.LitecoinRegtestXpub).
const ltcRegtestTpub = "tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M"

// FuzzCheck: any string for any method is accepted or refused, never a
// panic; what is accepted is canonical (checking it again gives itself)
// and valid for hdwallet.
//
//	go test ./payout -run '^$' -fuzz '^FuzzCheck$' -fuzztime 5m
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
		"ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh", "M7wtsL7wSHDBJVMWWhtQfTMSYYkyooAAXM", "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf",
		"0x9858effd232b4033e47d90003d41ec34ecaeda94", usdtEthereum, usdtTron, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH",
		"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", "11111111111111111111111111111111", "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs"} {
		for i := range domain.Methods {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, m uint8, s string) {
		meth := domain.Methods[int(m)%len(domain.Methods)]
		v := checker()
		got, err := v.Check(context.Background(), meth, s)
		if err != nil {
			var r *payout.Refusal
			if !errors.As(err, &r) {
				t.Fatalf("%s %q: not a refusal: %v", meth.Network, s, err)
			}
			return
		}
		if err := hdwallet.ValidateAddress(hdwallet.Network(meth.Network), got); err != nil {
			t.Fatalf("%s %q: canonical %q invalid: %v", meth.Network, s, got, err)
		}
		again, err := v.Check(context.Background(), meth, got)
		if err != nil || again != got {
			t.Fatalf("%s %q: canonical %q checks as %q, %v", meth.Network, s, got, again, err)
		}
	})
}
