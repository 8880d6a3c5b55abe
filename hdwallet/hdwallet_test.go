package hdwallet_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/btcsuite/btcd/btcutil/base58"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/ethereum/go-ethereum/common"
	"github.com/tyler-smith/go-bip39"

	"github.com/kernodeck/kernodeck/hdwallet"
)

// Vector sources (all public, read through the project's search tool):
//
//   - BIP84, https://github.com/bitcoin/bips/blob/master/bip-0084.mediawiki
//     ("Test vectors"): the "abandon ... about" mnemonic and the addresses of
//     m/84'/0'/0'/0/0 and /0/1, and the zprv of m/84'/0'/0'.
//   - SLIP-0132, https://github.com/satoshilabs/slips/blob/master/slip-0132.md
//     ("Bitcoin Test Vectors"): the zpub of m/84'/0'/0' and the ypub/yprv of
//     m/49'/0'/0' for the same mnemonic, and the registered version bytes.
//   - BIP32, https://github.com/bitcoin/bips/blob/master/bip-0032.mediawiki
//     test vectors 1, 2 and 5.
//   - BIP350, https://github.com/bitcoin/bips/blob/master/bip-0350.mediawiki
//     valid and invalid segwit addresses.
//   - Ethereum m/44'/60'/0'/0/0 of the mnemonic,
//     0x9858EfFD232B4033E47d90003D41EC34EcaEda94: the value every wallet
//     library publishes for it (ethers/MetaMask-compatible wallets, Trust
//     Wallet Core tests).
//   - Tron m/44'/195'/0'/0/0 of the mnemonic: the README of Ledger's Tron app,
//     https://github.com/LedgerHQ/app-tron/blob/develop/README.md
//     (TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH, hex 41c8599111f2...).
//   - Litecoin: Edge's wallet library tests,
//     https://github.com/EdgeApp/edge-currency-plugins/blob/master/test/common/utxobased/keymanager/coins/litecoin.spec.ts
//     (zpub of m/84'/2'/0' and ltc1qjmxnz78..., Ltub/Ltpv of m/44'/2'/0' with
//     its P2PKH script, Mtub/Mtpv of m/49'/2'/0', the vprv of m/84'/1'/0').
//   - Bitcoin testnet m/84'/1'/0': ACINQ Phoenix's WalletTest
//     (vpub5Y6cjg78... and tb1q6rz28mcf... for /0/0).
//
// The Ethereum and Tron account xpubs are not published, so the tests derive
// them from the mnemonic with go-bip39 and hdkeychain; TestMnemonicHelper
// first checks that helper against the published BIP84 zpub.

const mnemonic = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"

const h = hdkeychain.HardenedKeyStart

const (
	bip84Zpub = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"
	bip84Zprv = "zprvAdG4iTXWBoARxkkzNpNh8r6Qag3irQB8PzEMkAFeTRXxHpbF9z4QgEvBRmfvqWvGp42t42nvgGpNgYSJA9iefm1yYNZKEm7z6qUWCroSQnE"
	bip49Ypub = "ypub6Ww3ibxVfGzLrAH1PNcjyAWenMTbbAosGNB6VvmSEgytSER9azLDWCxoJwW7Ke7icmizBMXrzBx9979FfaHxHcrArf3zbeJJJUZPf663zsP"
	bip49Yprv = "yprvAHwhK6RbpuS3dgCYHM5jc2ZvEKd7Bi61u9FVhYMpgMSuZS613T1xxQeKTffhrHY79hZ5PsskBjcc6C2V7DrnsMsNaGDaWev3GLRQRgV7hxF"

	ltcZpub = "zpub6rPo5mF47z5coVm5rvWv7fv181awb7Vckn5Cf3xQXBVKu18kuBHDhNi1Jrb4br6vVD3ZbrnXemEsWJoR18mZwkUdzwD8TQnHDUCGxqZ6swA"
	ltcZprv = "zprvAdQSgFiAHcXKb1gcktyukXyGZykTBemmPZ9brfYnxqxM2CocMdxy9aPXTbTLv7dvJgWn2Efi4vFSyPbT4QqgarYrs583WCeMXM2q3TUU8FS"
	ltcLtub = "Ltub2YDQmP391UYeDYvLye9P1SuNJFkcRGN7SYHM8JMxaDnegcPTXHJ2BnYmvHnFnGPGKu2WMuCga6iZV3SDxDMGrRyMcrYEfSPhrpS1EPkC43E"
	ltcLtpv = "Ltpv7735AbcbmL1gbgDWj2ezvs59rh4RM1oTN2BKTKbfe3146FCPCNFbBBSWfuV9vCJNMXD9LuHpQnqVWpn2hbMhikqPdoGqbS3ptdPoNWEvvgR"
	ltcMtub = "Mtub2rz9F1pkisRsSZX8sa4Ajon9GhPP6JymLgpuHqbYdU5JKFLBF7Qy8b1tZ3dccj2fefrAxfrPdVkpCxuWn3g72UctH2bvJRkp6iFmp8aLeRZ"
	ltcMtpv = "Mtpv7RooeEQDUitupgpJcxZnfDwvq8hC24R7GAiscrqFhHHhit96vCNY7yudJgrM841dMbiRUQceC12566XAHHC8Rd1BtnBdokq9tmF7jLLvUdh"

	testVpub = "vpub5Y6cjg78GGuNLsaPhmYsiw4gYX3HoQiRBiSwDaBXKUafCt9bNwWQiitDk5VZ5BVxYnQdwoTyXSs2JHRPAgjAvtbBrf8ZhDYe2jWAqvZVnsc"
	testVprv = "vprv9K7GLAaERuM58PVvbk1sMo7wzVCoPwzZpVXLRBmum93gL5pSqQCAAvZjtmz93nnnYMr9i2FwG2fqrwYLRgJmDDwFjGiamGsbRMJ5Y6siJ8H"

	// BIP32 test vector 1.
	v1Master     = "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"
	v1M0H1       = "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ"
	v1M0H12H     = "xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5"
	v1M0H12HPrv  = "xprv9z4pot5VBttmtdRTWfWQmoH1taj2axGVzFqSb8C9xaxKymcFzXBDptWmT7FwuEzG3ryjH4ktypQSAewRiNMjANTtpgP4mLTj34bhnZX7UiM"
	v1M0H12H2    = "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV"
	v2M0H1       = "xpub6DF8uhdarytz3FWdA8TvFSvvAh8dP3283MY7p2V4SeE2wyWmG5mg5EwVvmdMVCQcoNJxGoWaU9DCWh89LojfZ537wTfunKau47EL2dhHKon"
	v2M0H1H      = "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL"
	ethAddress0  = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
	tronAddress0 = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"
	tronHex0     = "41c8599111f29c1e1e061265b4af93ea1f274ad78a"
)

// accountKey derives the account xpub at path from the test mnemonic. It
// handles private keys, which only tests may do.
func accountKey(t *testing.T, net *chaincfg.Params, path ...uint32) *hdkeychain.ExtendedKey {
	t.Helper()
	seed := bip39.NewSeed(mnemonic, "")
	key, err := hdkeychain.NewMaster(seed, net)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range path {
		if key, err = key.Derive(i); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := key.Neuter()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func mustParse(t *testing.T, network hdwallet.Network, key string) *hdwallet.Account {
	t.Helper()
	a, err := hdwallet.ParseAccountKey(network, key)
	if err != nil {
		t.Fatalf("ParseAccountKey(%s): %v", network, err)
	}
	return a
}

func mustAddress(t *testing.T, a *hdwallet.Account, index uint32) string {
	t.Helper()
	addr, err := a.Address(index)
	if err != nil {
		t.Fatalf("Address(%d): %v", index, err)
	}
	return addr
}

// reencode returns the segwit address s under another human-readable part:
// the same witness program, as a regtest node would display it.
func reencode(t *testing.T, s, hrp string) string {
	t.Helper()
	_, data, err := bech32.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := bech32.Encode(hrp, data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMnemonicHelper checks the test's own derivation against BIP84 and
// SLIP-0132 before it is trusted for Ethereum, Tron and Litecoin.
func TestMnemonicHelper(t *testing.T) {
	key := accountKey(t, &chaincfg.MainNetParams, h+84, h, h)
	zpub, err := key.CloneWithVersion([]byte{0x04, 0xb2, 0x47, 0x46})
	if err != nil {
		t.Fatal(err)
	}
	if zpub.String() != bip84Zpub {
		t.Fatalf("m/84'/0'/0' = %s, want the SLIP-0132 zpub", zpub)
	}
}

func TestBIP84Bitcoin(t *testing.T) {
	want := []string{
		"bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", // m/84'/0'/0'/0/0
		"bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g", // m/84'/0'/0'/0/1
	}
	// The same account as wallets export it: zpub (Electrum, Trezor) and
	// xpub (Bitcoin Core descriptors).
	xpub := accountKey(t, &chaincfg.MainNetParams, h+84, h, h).String()
	for _, key := range []string{bip84Zpub, xpub, bip84Zpub + "\n"} {
		a := mustParse(t, hdwallet.Bitcoin, key)
		for i, w := range want {
			if got := mustAddress(t, a, uint32(i)); got != w {
				t.Errorf("%.4s: index %d = %s, want %s", key, i, got, w)
			}
		}
	}
}

func TestBIP44Ethereum(t *testing.T) {
	a := mustParse(t, hdwallet.Ethereum, accountKey(t, &chaincfg.MainNetParams, h+44, h+60, h).String())
	if got := mustAddress(t, a, 0); got != ethAddress0 {
		t.Fatalf("m/44'/60'/0'/0/0 = %s, want %s (EIP-55 checksummed)", got, ethAddress0)
	}
}

func TestBIP44Tron(t *testing.T) {
	a := mustParse(t, hdwallet.Tron, accountKey(t, &chaincfg.MainNetParams, h+44, h+195, h).String())
	got := mustAddress(t, a, 0)
	if got != tronAddress0 {
		t.Fatalf("m/44'/195'/0'/0/0 = %s, want %s", got, tronAddress0)
	}
	evm, err := hdwallet.EthereumAddressOfTron(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := common.HexToAddress(tronHex0[2:]); evm != want {
		t.Fatalf("EthereumAddressOfTron = %s, want %s", evm.Hex(), want.Hex())
	}
	if back := hdwallet.TronAddressFromEVM(evm); back != tronAddress0 {
		t.Fatalf("TronAddressFromEVM = %s, want %s", back, tronAddress0)
	}
}

func TestBIP84Litecoin(t *testing.T) {
	const want = "ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh" // m/84'/2'/0'/0/0
	xpub := accountKey(t, &chaincfg.MainNetParams, h+84, h+2, h).String()
	for _, key := range []string{ltcZpub, xpub} {
		if got := mustAddress(t, mustParse(t, hdwallet.Litecoin, key), 0); got != want {
			t.Errorf("%.4s: m/84'/2'/0'/0/0 = %s, want %s", key, got, want)
		}
	}
}

// TestLtubVersion checks that Ledger/Trezor's Ltub version bytes are
// understood: Edge publishes the P2PKH script of m/44'/2'/0'/0/0 for this
// Ltub, whose key hash must be the witness program we derive.
func TestLtubVersion(t *testing.T) {
	got := mustAddress(t, mustParse(t, hdwallet.Litecoin, ltcLtub), 0)
	_, data, err := bech32.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := bech32.ConvertBits(data[1:], 5, 8, false)
	if err != nil {
		t.Fatal(err)
	}
	// scriptPubKey 76a914 65d4f0444069f3881221e24bb6a99b1d53e008cf 88ac.
	if fmt.Sprintf("%x", prog) != "65d4f0444069f3881221e24bb6a99b1d53e008cf" || data[0] != 0 {
		t.Fatalf("Ltub m/44'/2'/0'/0/0 gave %s (v%d program %x)", got, data[0], prog)
	}
}

func TestTestnetAndRegtest(t *testing.T) {
	const tb0 = "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl" // m/84'/1'/0'/0/0
	tpub := accountKey(t, &chaincfg.RegressionNetParams, h+84, h+1, h).String()
	if !strings.HasPrefix(tpub, "tpub") {
		t.Fatalf("helper gave %.4s, want tpub", tpub)
	}
	cases := []struct {
		network hdwallet.Network
		key     string
		want    string
	}{
		{hdwallet.BitcoinTestnet, testVpub, tb0},
		{hdwallet.BitcoinTestnet, tpub, tb0},
		{hdwallet.BitcoinRegtest, testVpub, reencode(t, tb0, "bcrt")},
		{hdwallet.BitcoinRegtest, tpub, reencode(t, tb0, "bcrt")},
		{hdwallet.LitecoinTestnet, tpub, reencode(t, tb0, "tltc")},
		{hdwallet.LitecoinRegtest, tpub, reencode(t, tb0, "rltc")},
		{hdwallet.LitecoinRegtest, testVpub, reencode(t, tb0, "rltc")},
	}
	for _, c := range cases {
		got := mustAddress(t, mustParse(t, c.network, c.key), 0)
		if got != c.want {
			t.Errorf("%s %.4s: %s, want %s", c.network, c.key, got, c.want)
		}
		if err := hdwallet.ValidateAddress(c.network, got); err != nil {
			t.Errorf("%s: ValidateAddress(%s): %v", c.network, got, err)
		}
	}
	for _, p := range []string{"bcrt1q", "rltc1q"} {
		if !strings.HasPrefix(reencode(t, tb0, strings.TrimSuffix(p, "1q")), p) {
			t.Fatalf("re-encoding lost prefix %s", p)
		}
	}
}

func TestRefusesPrivateKeys(t *testing.T) {
	cases := []struct {
		network hdwallet.Network
		key     string
	}{
		{hdwallet.Bitcoin, bip84Zprv},
		{hdwallet.Bitcoin, bip49Yprv},
		{hdwallet.Bitcoin, v1M0H12HPrv},
		{hdwallet.Ethereum, v1M0H12HPrv},
		{hdwallet.Tron, v1M0H12HPrv},
		{hdwallet.Litecoin, ltcZprv},
		{hdwallet.Litecoin, ltcLtpv},
		{hdwallet.Litecoin, ltcMtpv},
		{hdwallet.BitcoinTestnet, testVprv},
		{hdwallet.BitcoinRegtest, testVprv},
		// BIP32 vector 5: private key data under the xpub version.
		{hdwallet.Bitcoin, "xpub661MyMwAqRbcEYS8w7XLSVeEsBXy79zSzH1J8vCdxAZningWLdN3zgtU6LBpB85b3D2yc8sfvZU521AAwdZafEz7mnzBBsz4wKY5fTtTQBm"},
	}
	for _, c := range cases {
		_, err := hdwallet.ParseAccountKey(c.network, c.key)
		if !errors.Is(err, hdwallet.ErrPrivateKey) {
			t.Errorf("%s %.4s...: err = %v, want ErrPrivateKey", c.network, c.key, err)
			continue
		}
		if strings.Contains(err.Error(), c.key[4:20]) {
			t.Errorf("error message repeats the private key: %v", err)
		}
	}
}

func TestRefusesWrongKeys(t *testing.T) {
	cases := []struct {
		name    string
		network hdwallet.Network
		key     string
		want    error
	}{
		{"master key", hdwallet.Bitcoin, v1Master, hdwallet.ErrNotAccountKey},
		{"depth 2 (BIP32 v1 m/0H/1)", hdwallet.Bitcoin, v1M0H1, hdwallet.ErrNotAccountKey},
		{"depth 4 (BIP32 v1 m/0H/1/2H/2)", hdwallet.Bitcoin, v1M0H12H2, hdwallet.ErrNotAccountKey},
		{"depth 3 not hardened (BIP32 v2 m/0/2147483647H/1)", hdwallet.Ethereum, v2M0H1, hdwallet.ErrNotAccountKey},
		{"testnet key on mainnet", hdwallet.Bitcoin, testVpub, hdwallet.ErrWrongNetwork},
		{"mainnet key on regtest", hdwallet.BitcoinRegtest, bip84Zpub, hdwallet.ErrWrongNetwork},
		{"zpub on Ethereum", hdwallet.Ethereum, bip84Zpub, hdwallet.ErrWrongNetwork},
		{"Ltub on Bitcoin", hdwallet.Bitcoin, ltcLtub, hdwallet.ErrWrongNetwork},
		{"ypub (BIP49 nested segwit)", hdwallet.Bitcoin, bip49Ypub, hdwallet.ErrUnsupportedScript},
		{"Mtub (Litecoin nested segwit)", hdwallet.Litecoin, ltcMtub, hdwallet.ErrUnsupportedScript},
		{"unknown network", hdwallet.Network("solana"), bip84Zpub, hdwallet.ErrUnknownNetwork},
		{"empty", hdwallet.Bitcoin, "", hdwallet.ErrInvalidKey},
		{"garbage", hdwallet.Bitcoin, "xpub-not-a-key", hdwallet.ErrInvalidKey},
		{"bad checksum", hdwallet.Bitcoin, bip84Zpub[:len(bip84Zpub)-1] + "t", hdwallet.ErrInvalidKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := hdwallet.ParseAccountKey(c.network, c.key)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v (account %v), want %v", err, a, c.want)
			}
			if len(c.key) > 20 && strings.Contains(err.Error(), c.key[4:20]) {
				t.Fatalf("error message repeats the key: %v", err)
			}
		})
	}
}

// TestBIP32Vector5 feeds BIP32's invalid extended keys: all are refused, and
// those carrying or announcing private key material as private keys.
func TestBIP32Vector5(t *testing.T) {
	cases := []struct {
		key  string
		want error
	}{
		{"xpub661MyMwAqRbcEYS8w7XLSVeEsBXy79zSzH1J8vCdxAZningWLdN3zgtU6LBpB85b3D2yc8sfvZU521AAwdZafEz7mnzBBsz4wKY5fTtTQBm", hdwallet.ErrPrivateKey},    // pubkey version / prvkey mismatch
		{"xprv9s21ZrQH143K24Mfq5zL5MhWK9hUhhGbd45hLXo2Pq2oqzMMo63oStZzFGTQQD3dC4H2D5GBj7vWvSQaaBv5cxi9gafk7NF3pnBju6dwKvH", hdwallet.ErrPrivateKey},    // prvkey version / pubkey mismatch
		{"xpub661MyMwAqRbcEYS8w7XLSVeEsBXy79zSzH1J8vCdxAZningWLdN3zgtU6Txnt3siSujt9RCVYsx4qHZGc62TG4McvMGcAUjeuwZdduYEvFn", hdwallet.ErrInvalidKey},    // invalid pubkey prefix 04
		{"xprv9s21ZrQH143K24Mfq5zL5MhWK9hUhhGbd45hLXo2Pq2oqzMMo63oStZzFGpWnsj83BHtEy5Zt8CcDr1UiRXuWCmTQLxEK9vbz5gPstX92JQ", hdwallet.ErrPrivateKey},    // invalid prvkey prefix 04
		{"xpub661MyMwAqRbcEYS8w7XLSVeEsBXy79zSzH1J8vCdxAZningWLdN3zgtU6N8ZMMXctdiCjxTNq964yKkwrkBJJwpzZS4HS2fxvyYUA4q2Xe4", hdwallet.ErrInvalidKey},    // invalid pubkey prefix 01
		{"xprv9s21ZrQH143K24Mfq5zL5MhWK9hUhhGbd45hLXo2Pq2oqzMMo63oStZzFAzHGBP2UuGCqWLTAPLcMtD9y5gkZ6Eq3Rjuahrv17fEQ3Qen6J", hdwallet.ErrPrivateKey},    // invalid prvkey prefix 01
		{"xprv9s2SPatNQ9Vc6GTbVMFPFo7jsaZySyzk7L8n2uqKXJen3KUmvQNTuLh3fhZMBoG3G4ZW1N2kZuHEPY53qmbZzCHshoQnNf4GvELZfqTUrcv", hdwallet.ErrPrivateKey},    // zero depth with non-zero parent fingerprint
		{"xpub661no6RGEX3uJkY4bNnPcw4URcQTrSibUZ4NqJEw5eBkv7ovTwgiT91XX27VbEXGENhYRCf7hyEbWrR3FewATdCEebj6znwMfQkhRYHRLpJ", hdwallet.ErrNotAccountKey}, // zero depth with non-zero parent fingerprint
		{"xprv9s21ZrQH4r4TsiLvyLXqM9P7k1K3EYhA1kkD6xuquB5i39AU8KF42acDyL3qsDbU9NmZn6MsGSUYZEsuoePmjzsB3eFKSUEh3Gu1N3cqVUN", hdwallet.ErrPrivateKey},    // zero depth with non-zero index
		{"xpub661MyMwAuDcm6CRQ5N4qiHKrJ39Xe1R1NyfouMKTTWcguwVcfrZJaNvhpebzGerh7gucBvzEQWRugZDuDXjNDRmXzSZe4c7mnTK97pTvGS8", hdwallet.ErrNotAccountKey}, // zero depth with non-zero index
		{"DMwo58pR1QLEFihHiXPVykYB6fJmsTeHvyTp7hRThAtCX8CvYzgPcn8XnmdfHGMQzT7ayAmfo4z3gY5KfbrZWZ6St24UVf2Qgo6oujFktLHdHY4", hdwallet.ErrPrivateKey},    // unknown extended key version (private key data)
		{"DMwo58pR1QLEFihHiXPVykYB6fJmsTeHvyTp7hRThAtCX8CvYzgPcn8XnmdfHPmHJiEDXkTiJTVV9rHEBUem2mwVbbNfvT2MTcAqj3nesx8uBf9", hdwallet.ErrInvalidKey},    // unknown extended key version
		{"xprv9s21ZrQH143K24Mfq5zL5MhWK9hUhhGbd45hLXo2Pq2oqzMMo63oStZzF93Y5wvzdUayhgkkFoicQZcP3y52uPPxFnfoLZB21Teqt1VvEHx", hdwallet.ErrPrivateKey},    // private key 0 not in 1..n-1
		{"xprv9s21ZrQH143K24Mfq5zL5MhWK9hUhhGbd45hLXo2Pq2oqzMMo63oStZzFAzHGBP2UuGCqWLTAPLcMtD5SDKr24z3aiUvKr9bJpdrcLg1y3G", hdwallet.ErrPrivateKey},    // private key n not in 1..n-1
		{"xpub661MyMwAqRbcEYS8w7XLSVeEsBXy79zSzH1J8vCdxAZningWLdN3zgtU6Q5JXayek4PRsn35jii4veMimro1xefsM58PgBMrvdYre8QyULY", hdwallet.ErrInvalidKey},    // invalid pubkey 020000...07
		{"xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHL", hdwallet.ErrPrivateKey},    // invalid checksum
	}
	for i, c := range cases {
		if _, err := hdwallet.ParseAccountKey(hdwallet.Bitcoin, c.key); !errors.Is(err, c.want) {
			t.Errorf("vector 5 #%d: err = %v, want %v", i+1, err, c.want)
		}
	}
}

func TestIndexRange(t *testing.T) {
	a := mustParse(t, hdwallet.Bitcoin, bip84Zpub)
	if _, err := a.Address(h - 1); err != nil {
		t.Fatalf("Address(2^31-1): %v", err)
	}
	for _, i := range []uint32{h, h + 1, ^uint32(0)} {
		if _, err := a.Address(i); !errors.Is(err, hdwallet.ErrIndexOutOfRange) {
			t.Errorf("Address(%d): err = %v, want ErrIndexOutOfRange", i, err)
		}
	}
}

func allAccounts(t *testing.T) []*hdwallet.Account {
	return []*hdwallet.Account{
		mustParse(t, hdwallet.Bitcoin, bip84Zpub),
		mustParse(t, hdwallet.BitcoinTestnet, testVpub),
		mustParse(t, hdwallet.BitcoinRegtest, testVpub),
		mustParse(t, hdwallet.Litecoin, ltcZpub),
		mustParse(t, hdwallet.LitecoinTestnet, testVpub),
		mustParse(t, hdwallet.LitecoinRegtest, testVpub),
		mustParse(t, hdwallet.Ethereum, accountKey(t, &chaincfg.MainNetParams, h+44, h+60, h).String()),
		mustParse(t, hdwallet.Tron, accountKey(t, &chaincfg.MainNetParams, h+44, h+195, h).String()),
	}
}

// TestDistinctAddresses: indexes never collide, and every derived address is
// one ValidateAddress accepts for its network.
func TestDistinctAddresses(t *testing.T) {
	for _, a := range allAccounts(t) {
		t.Run(string(a.Network()), func(t *testing.T) {
			if mustAddress(t, a, 0) == mustAddress(t, a, 1) {
				t.Fatal("indexes 0 and 1 give the same address")
			}
			first, again := mustAddress(t, a, 7), mustAddress(t, a, 7)
			if first != again {
				t.Fatal("the same index gave two addresses")
			}
			seen := make(map[string]uint32, 1000)
			for i := uint32(0); i < 1000; i++ {
				addr := mustAddress(t, a, i)
				if j, dup := seen[addr]; dup {
					t.Fatalf("indexes %d and %d both give %s", j, i, addr)
				}
				seen[addr] = i
				if i%97 == 0 {
					if err := hdwallet.ValidateAddress(a.Network(), addr); err != nil {
						t.Fatalf("ValidateAddress(%s): %v", addr, err)
					}
				}
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	a := mustParse(t, hdwallet.Bitcoin, bip84Zpub)
	want := make([]string, 64)
	for i := range want {
		want[i] = mustAddress(t, a, uint32(i))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range want {
				if got, err := a.Address(uint32(i)); err != nil || got != want[i] {
					t.Errorf("concurrent Address(%d) = %s, %v", i, got, err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestFingerprintAndString: the fingerprint is the one BIP32 children record
// as their parent's (vector 1, m/0H/1/2H and m/0H/1/2H/2), and printing an
// account never prints the key.
func TestFingerprintAndString(t *testing.T) {
	a := mustParse(t, hdwallet.Bitcoin, v1M0H12H)
	child := base58.Decode(v1M0H12H2)
	if want := fmt.Sprintf("%x", child[5:9]); a.Fingerprint() != want {
		t.Fatalf("Fingerprint = %s, want %s", a.Fingerprint(), want)
	}
	for _, s := range []string{a.String(), fmt.Sprint(a), fmt.Sprintf("%v %+v", a, a)} {
		if strings.Contains(s, v1M0H12H[4:20]) || !strings.Contains(s, a.Fingerprint()) {
			t.Fatalf("String() = %q", s)
		}
	}
}

func TestValidateAddress(t *testing.T) {
	valid := []struct {
		network hdwallet.Network
		addr    string
	}{
		{hdwallet.Bitcoin, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"},
		{hdwallet.Bitcoin, "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4"},                                 // BIP350
		{hdwallet.Bitcoin, "bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kt5nd6y"}, // BIP350
		{hdwallet.Bitcoin, "BC1SW50QGDZ25J"},                                                             // BIP350
		{hdwallet.Bitcoin, "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs"},                                       // BIP350
		{hdwallet.Bitcoin, "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"},             // BIP350
		{hdwallet.BitcoinTestnet, "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7"},      // BIP350
		{hdwallet.BitcoinTestnet, "tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c"},      // BIP350
		{hdwallet.Bitcoin, "1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabA"},                                         // SLIP-0132 m/44'
		{hdwallet.Bitcoin, "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf"},                                         // SLIP-0132 m/49'
		{hdwallet.Litecoin, "ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh"},                               // Edge
		{hdwallet.Litecoin, "LUWPbpM43E2p7ZSh8cyTBEkvpHmr3cB8Ez"},                                        // Edge
		{hdwallet.Litecoin, "M7wtsL7wSHDBJVMWWhtQfTMSYYkyooAAXM"},                                        // Edge
		{hdwallet.Ethereum, ethAddress0},
		{hdwallet.Ethereum, strings.ToLower(ethAddress0)},
		{hdwallet.Ethereum, "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}, // EIP-55
		{hdwallet.Ethereum, "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"}, // EIP-55
		{hdwallet.Tron, tronAddress0},
	}
	for _, c := range valid {
		if err := hdwallet.ValidateAddress(c.network, c.addr); err != nil {
			t.Errorf("ValidateAddress(%s, %s): %v", c.network, c.addr, err)
		}
	}
	invalid := []struct {
		network hdwallet.Network
		addr    string
	}{
		{hdwallet.Bitcoin, "tc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq5zuyut"},               // BIP350: hrp
		{hdwallet.Bitcoin, "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd"},               // BIP350: bech32 for v1
		{hdwallet.BitcoinTestnet, "tb1z0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqglt7rf"},        // BIP350: bech32 for v2
		{hdwallet.Bitcoin, "BC1S0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ54WELL"},               // BIP350: bech32 for v16
		{hdwallet.Bitcoin, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh"},                                   // BIP350: bech32m for v0
		{hdwallet.BitcoinTestnet, "tb1q0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq24jc47"},        // BIP350: bech32m for v0
		{hdwallet.Bitcoin, "bc1p38j9r5y49hruaue7wxjce0updqjuyyx0kh56v8s25huc6995vvpql3jow4"},               // BIP350: character
		{hdwallet.Bitcoin, "BC130XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ7ZWS8R"},               // BIP350: witness version
		{hdwallet.Bitcoin, "bc1pw5dgrnzv"},                                                                 // BIP350: 1-byte program
		{hdwallet.Bitcoin, "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v8n0nx0muaewav253zgeav"}, // BIP350: 41 bytes
		{hdwallet.Bitcoin, "BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P"},                                         // BIP350: v0 length
		{hdwallet.BitcoinTestnet, "tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq47Zagq"},        // BIP350: mixed case
		{hdwallet.Bitcoin, "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v07qwwzcrf"},             // BIP350: padding
		{hdwallet.BitcoinTestnet, "tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vpggkg4j"},        // BIP350: padding
		{hdwallet.Bitcoin, "bc1gmk9yu"},                                         // BIP350: empty data
		{hdwallet.Bitcoin, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyv"},        // changed checksum
		{hdwallet.Bitcoin, "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"},        // testnet on mainnet
		{hdwallet.BitcoinRegtest, "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"}, // testnet on regtest
		{hdwallet.Bitcoin, "ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh"},       // Litecoin on Bitcoin
		{hdwallet.Litecoin, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"},       // Bitcoin on Litecoin
		{hdwallet.Litecoin, "1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabA"},               // Bitcoin P2PKH on Litecoin
		{hdwallet.Bitcoin, "LUWPbpM43E2p7ZSh8cyTBEkvpHmr3cB8Ez"},                // Litecoin P2PKH on Bitcoin
		{hdwallet.Bitcoin, "1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabB"},                // base58 checksum
		{hdwallet.Ethereum, "0x9858efFD232B4033E47d90003D41EC34EcaEda94"},       // EIP-55 mismatch
		{hdwallet.Ethereum, "9858EfFD232B4033E47d90003D41EC34EcaEda94"},         // no 0x
		{hdwallet.Ethereum, "0x9858EfFD232B4033E47d90003D41EC34EcaEda9"},        // short
		{hdwallet.Ethereum, tronAddress0},
		{hdwallet.Tron, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdJ"}, // checksum
		{hdwallet.Tron, "1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabA"}, // Bitcoin version byte
		{hdwallet.Tron, ethAddress0},
		{hdwallet.Bitcoin, ""},
	}
	for _, c := range invalid {
		if err := hdwallet.ValidateAddress(c.network, c.addr); !errors.Is(err, hdwallet.ErrInvalidAddress) {
			t.Errorf("ValidateAddress(%s, %s): err = %v, want ErrInvalidAddress", c.network, c.addr, err)
		}
	}
	if err := hdwallet.ValidateAddress("dogecoin", tronAddress0); !errors.Is(err, hdwallet.ErrUnknownNetwork) {
		t.Errorf("unknown network: err = %v", err)
	}
}
