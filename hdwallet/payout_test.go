package hdwallet_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/base58"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"

	"github.com/kernodeck/kernodeck/hdwallet"
)

// TestInternalChain checks change addresses against BIP84's published
// m/84'/0'/0'/1/0, and that the internal chain differs from the external.
func TestInternalChain(t *testing.T) {
	a := mustParse(t, hdwallet.Bitcoin, bip84Zpub)
	got, err := a.InternalAddress(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "bc1q8c6fshw2dlwun7ekn9qwf37cu2rn755upcp6el"; got != want { // BIP84 "first change address"
		t.Fatalf("m/84'/0'/0'/1/0 = %s, want %s", got, want)
	}
	if ext := mustAddress(t, a, 0); ext == got {
		t.Fatal("external and internal chains gave the same address")
	}
	// PublicKey gives the key behind each address.
	for _, c := range []struct {
		chain uint32
		addr  func(uint32) (string, error)
	}{{hdwallet.External, a.Address}, {hdwallet.Internal, a.InternalAddress}} {
		pub, err := a.PublicKey(c.chain, 3)
		if err != nil {
			t.Fatal(err)
		}
		want, err := btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(pub), &chaincfg.MainNetParams)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := c.addr(3); got != want.EncodeAddress() {
			t.Errorf("chain %d: address %s, key gives %s", c.chain, got, want.EncodeAddress())
		}
	}
	if _, err := a.PublicKey(2, 0); err == nil {
		t.Error("chain 2 accepted")
	}
	if _, err := a.InternalAddress(1 << 31); !errors.Is(err, hdwallet.ErrIndexOutOfRange) {
		t.Errorf("hardened internal index: err = %v", err)
	}
}

// TestOutputScript compares OutputScript with btcd's own address decoding
// and script building, for every kind of address on Bitcoin's networks.
func TestOutputScript(t *testing.T) {
	cases := []struct {
		network hdwallet.Network
		params  *chaincfg.Params
		addr    string
	}{
		{hdwallet.Bitcoin, &chaincfg.MainNetParams, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"},
		{hdwallet.Bitcoin, &chaincfg.MainNetParams, "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4"},
		{hdwallet.Bitcoin, &chaincfg.MainNetParams, "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"},
		{hdwallet.Bitcoin, &chaincfg.MainNetParams, "1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabA"},
		{hdwallet.Bitcoin, &chaincfg.MainNetParams, "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf"},
		{hdwallet.BitcoinTestnet, &chaincfg.TestNet3Params, "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7"},
	}
	for _, c := range cases {
		got, err := hdwallet.OutputScript(c.network, c.addr)
		if err != nil {
			t.Fatalf("OutputScript(%s): %v", c.addr, err)
		}
		addr, err := btcutil.DecodeAddress(c.addr, c.params)
		if err != nil {
			t.Fatal(err)
		}
		want, err := txscript.PayToAddrScript(addr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("OutputScript(%s) = %x, want %x", c.addr, got, want)
		}
	}
	// Litecoin: the P2PKH and P2SH bytes of its own (Edge's vectors).
	for addr, class := range map[string]txscript.ScriptClass{
		"LUWPbpM43E2p7ZSh8cyTBEkvpHmr3cB8Ez":          txscript.PubKeyHashTy,
		"M7wtsL7wSHDBJVMWWhtQfTMSYYkyooAAXM":          txscript.ScriptHashTy,
		"ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh": txscript.WitnessV0PubKeyHashTy,
	} {
		script, err := hdwallet.OutputScript(hdwallet.Litecoin, addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := txscript.GetScriptClass(script); got != class {
			t.Errorf("%s: script class %s, want %s", addr, got, class)
		}
	}
	for _, n := range []hdwallet.Network{hdwallet.Ethereum, hdwallet.Tron, hdwallet.Solana} {
		if _, err := hdwallet.OutputScript(n, tronAddress0); !errors.Is(err, hdwallet.ErrUnknownNetwork) {
			t.Errorf("OutputScript on %s: err = %v", n, err)
		}
	}
	if !hdwallet.IsLegacyScriptHashVersion(hdwallet.Litecoin, "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf") ||
		hdwallet.IsLegacyScriptHashVersion(hdwallet.Litecoin, "M7wtsL7wSHDBJVMWWhtQfTMSYYkyooAAXM") ||
		hdwallet.IsLegacyScriptHashVersion(hdwallet.Bitcoin, "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf") {
		t.Error("IsLegacyScriptHashVersion: wrong answer")
	}
}

func TestSolanaAddress(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	valid := []string{
		base58.Encode(pub),
		"11111111111111111111111111111111",             // 32 zero bytes (the system program)
		"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", // USDC's mint
	}
	for _, s := range valid {
		key, err := hdwallet.SolanaPublicKey(s)
		if err != nil || len(key) != 32 {
			t.Errorf("SolanaPublicKey(%s) = %x, %v", s, key, err)
		}
		if err := hdwallet.ValidateAddress(hdwallet.Solana, s); err != nil {
			t.Errorf("ValidateAddress(solana, %s): %v", s, err)
		}
	}
	for _, s := range []string{
		"",
		base58.Encode(pub[:31]),       // 31 bytes
		base58.Encode(append(pub, 1)), // 33 bytes
		"1" + base58.Encode(pub),      // a leading zero byte more
		base58.Encode(pub)[:43] + "0", // '0' is not base58
		base58.Encode(pub)[:43] + "l", // nor 'l'
		" " + base58.Encode(pub),      // no space forgiven here
		tronAddress0, ethAddress0,
	} {
		if err := hdwallet.ValidateAddress(hdwallet.Solana, s); !errors.Is(err, hdwallet.ErrInvalidAddress) {
			t.Errorf("ValidateAddress(solana, %q): err = %v", s, err)
		}
	}
	if _, err := hdwallet.ParseAccountKey(hdwallet.Solana, bip84Zpub); !errors.Is(err, hdwallet.ErrUnknownNetwork) {
		t.Errorf("ParseAccountKey(solana): err = %v, want ErrUnknownNetwork", err)
	}
}

func TestKeyOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"[d34db33f/84'/2'/0']":    "[d34db33f/84'/2'/0']",
		"d34db33f/84h/2h/0h":      "[d34db33f/84'/2'/0']",
		" [73C5DA0A/84'/1'/7']\n": "[73c5da0a/84'/1'/7']",
	} {
		o, err := hdwallet.ParseKeyOrigin(in)
		if err != nil {
			t.Fatalf("ParseKeyOrigin(%q): %v", in, err)
		}
		if o.String() != want {
			t.Errorf("ParseKeyOrigin(%q) = %s, want %s", in, o, want)
		}
	}
	o, _ := hdwallet.ParseKeyOrigin("[d34db33f/84'/2'/0']")
	if got := hdwallet.FormatPath(o.KeyPath(hdwallet.Internal, 5)); got != "m/84'/2'/0'/1/5" {
		t.Errorf("KeyPath = %s", got)
	}
	if o.FingerprintUint32() != 0x3fb34dd3 {
		t.Errorf("FingerprintUint32 = %x, want the bytes d3 4d b3 3f read little-endian", o.FingerprintUint32())
	}
	for _, bad := range []string{"", "[d34db33f]", "[d34db33f/84'/2']", "[d34db33f/84'/2'/0'/0]", "[d34db33f/84'/2'/0]",
		"[d34db3/84'/2'/0']", "[zz4db33f/84'/2'/0']", "[d34db33f/84'/2'/0'", "[d34db33f/84'/2'/2147483648']", "[d34db33f/-1'/2'/0']"} {
		if _, err := hdwallet.ParseKeyOrigin(bad); !errors.Is(err, hdwallet.ErrInvalidOrigin) {
			t.Errorf("ParseKeyOrigin(%q): err = %v, want ErrInvalidOrigin", bad, err)
		}
	}

	// The BIP84 account is m/84'/0'/0': its origin's last element must be 0'.
	a := mustParse(t, hdwallet.Bitcoin, bip84Zpub)
	good, _ := hdwallet.ParseKeyOrigin("[73c5da0a/84'/0'/0']")
	if err := a.CheckOrigin(good); err != nil {
		t.Errorf("CheckOrigin(%s): %v", good, err)
	}
	other, _ := hdwallet.ParseKeyOrigin("[73c5da0a/84'/0'/1']")
	if err := a.CheckOrigin(other); !errors.Is(err, hdwallet.ErrInvalidOrigin) {
		t.Errorf("CheckOrigin(%s): err = %v, want ErrInvalidOrigin", other, err)
	}
}
