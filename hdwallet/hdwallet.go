// Package hdwallet derives deposit addresses from watch-only extended public
// keys (BIP32), so that the server can hand every payment request an address
// of its own while holding no private key: a compromise of the server can
// reveal which addresses belong to the shop, never spend from them.
//
// An operator exports one ACCOUNT-level extended public key per network from
// the shop's wallet (BIP84 m/84'/0'/0' for Bitcoin, m/84'/2'/0' for Litecoin,
// BIP44 m/44'/60'/0' for Ethereum, m/44'/195'/0' for Tron). Addresses are the
// external chain of that account, m/.../0/index, which is what the wallet
// itself scans, so every payment shows up in the operator's wallet as well.
//
// Solana is deliberately absent: its wallets derive ed25519 keys with SLIP-10,
// which has only hardened derivation, so no extended public key can produce
// new Solana addresses.
package hdwallet

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/base58"
	"github.com/btcsuite/btcd/btcutil/hdkeychain"
)

// Network names a chain together with its address format. Test networks are
// distinct networks because their addresses differ (tb1/bcrt1, tltc1/rltc1):
// an address of the wrong network would be refused by the customer's wallet
// or, worse, sent to a chain the shop does not watch.
type Network string

// The networks deposit addresses can be derived for. Mainnet names are the
// domain's network names; the test variants exist for development and the
// end-to-end tests (btcd and Litecoin Core in regtest mode).
const (
	Bitcoin         Network = "bitcoin"
	BitcoinTestnet  Network = "bitcoin-testnet"
	BitcoinRegtest  Network = "bitcoin-regtest"
	Litecoin        Network = "litecoin"
	LitecoinTestnet Network = "litecoin-testnet"
	LitecoinRegtest Network = "litecoin-regtest"
	Ethereum        Network = "ethereum"
	Tron            Network = "tron"
	// Solana only names the network whose addresses ValidateAddress
	// checks: no account key derives Solana addresses (see the package
	// comment), so ParseAccountKey refuses it as an unknown network.
	Solana Network = "solana"
)

// Errors returned by ParseAccountKey, Account.Address and ValidateAddress.
// They are sentinels so that callers (configuration loading, the API) can
// tell a refused key from a malformed one with errors.Is; messages never
// repeat the key itself, because an extended key in a log is a privacy
// leak (public) or a theft (private).
var (
	// ErrUnknownNetwork: the network is not one of the Network constants.
	ErrUnknownNetwork = errors.New("hdwallet: unknown network")
	// ErrPrivateKey: an extended PRIVATE key was given. The server must never
	// hold one, so it is refused even though it would work.
	ErrPrivateKey = errors.New("hdwallet: extended private key refused: the server must only hold the account's extended PUBLIC key (xpub/zpub/tpub/vpub/Ltub); export that from the wallet instead")
	// ErrInvalidKey: not a well-formed BIP32 extended public key.
	ErrInvalidKey = errors.New("hdwallet: invalid extended public key")
	// ErrWrongNetwork: the key's version bytes belong to another network
	// (for example a testnet tpub configured for Bitcoin mainnet).
	ErrWrongNetwork = errors.New("hdwallet: extended key is for another network")
	// ErrUnsupportedScript: the key's version bytes announce a script type
	// this package does not derive (ypub, Mtub: P2SH-wrapped segwit; Ypub,
	// Zpub: multisig). Deriving native segwit addresses from it would give
	// addresses the wallet does not scan.
	ErrUnsupportedScript = errors.New("hdwallet: extended key is for another address type")
	// ErrNotAccountKey: the key is not at account level (depth 3, hardened
	// child number), so m/.../0/index would not be the wallet's receive chain.
	ErrNotAccountKey = errors.New("hdwallet: not an account-level extended public key")
	// ErrIndexOutOfRange: the index is 2^31 or more, that is a hardened
	// index, which cannot be derived from a public key.
	ErrIndexOutOfRange = errors.New("hdwallet: address index out of range (must be below 2^31)")
	// ErrInvalidAddress: ValidateAddress refused the address.
	ErrInvalidAddress = errors.New("hdwallet: invalid address")
)

// serializedKeyLen is the length of a BIP32 serialized extended key:
// version(4) depth(1) parent fingerprint(4) child number(4) chain code(32)
// key data(33), followed by a 4-byte checksum once base58check encoded.
const serializedKeyLen = 78

// accountDepth is the depth of m/purpose'/coin'/account'.
const accountDepth = 3

// keyKind says what a version prefix announces.
type keyKind int

const (
	kindPublic      keyKind = iota // usable watch-only key
	kindPrivate                    // private key: always refused
	kindOtherScript                // public key for an address type we do not derive
)

// keyVersion describes one registered pair of version bytes (BIP32 for
// xpub/tpub, SLIP-0132 for the others).
type keyVersion struct {
	prefix  string // the base58 prefix it produces, for messages
	kind    keyKind
	testnet bool // testnet/regtest version bytes
}

// versions lists every version we recognise, including the refused ones, so
// that a refusal can say why instead of "unknown version".
var versions = map[uint32]keyVersion{
	0x0488b21e: {prefix: "xpub", kind: kindPublic},
	0x0488ade4: {prefix: "xprv", kind: kindPrivate},
	0x049d7cb2: {prefix: "ypub", kind: kindOtherScript},
	0x049d7878: {prefix: "yprv", kind: kindPrivate},
	0x04b24746: {prefix: "zpub", kind: kindPublic},
	0x04b2430c: {prefix: "zprv", kind: kindPrivate},
	0x0295b43f: {prefix: "Ypub", kind: kindOtherScript},
	0x0295b005: {prefix: "Yprv", kind: kindPrivate},
	0x02aa7ed3: {prefix: "Zpub", kind: kindOtherScript},
	0x02aa7a99: {prefix: "Zprv", kind: kindPrivate},
	0x043587cf: {prefix: "tpub", kind: kindPublic, testnet: true},
	0x04358394: {prefix: "tprv", kind: kindPrivate, testnet: true},
	0x044a5262: {prefix: "upub", kind: kindOtherScript, testnet: true},
	0x044a4e28: {prefix: "uprv", kind: kindPrivate, testnet: true},
	0x045f1cf6: {prefix: "vpub", kind: kindPublic, testnet: true},
	0x045f18bc: {prefix: "vprv", kind: kindPrivate, testnet: true},
	0x024289ef: {prefix: "Upub", kind: kindOtherScript, testnet: true},
	0x024285b5: {prefix: "Uprv", kind: kindPrivate, testnet: true},
	0x02575483: {prefix: "Vpub", kind: kindOtherScript, testnet: true},
	0x02575048: {prefix: "Vprv", kind: kindPrivate, testnet: true},
	0x019da462: {prefix: "Ltub", kind: kindPublic},
	0x019d9cfe: {prefix: "Ltpv", kind: kindPrivate},
	0x01b26ef6: {prefix: "Mtub", kind: kindOtherScript},
	0x01b26792: {prefix: "Mtpv", kind: kindPrivate},
	0x0436f6e1: {prefix: "ttub", kind: kindPublic, testnet: true},
	0x0436ef7d: {prefix: "ttpv", kind: kindPrivate, testnet: true},
}

// params is what differs between networks.
type params struct {
	// accepted lists the public prefixes wallets export for this network.
	accepted []string
	// hrp is the bech32 human-readable part for segwit networks, "" otherwise.
	hrp string
}

// networks maps each Network to its parameters. Litecoin accepts xpub and
// zpub because Litecoin Core and Electrum-LTC export those, and Ltub because
// Ledger and Trezor do; its test networks accept Litecoin Core's tpub.
var networks = map[Network]params{
	Bitcoin:         {accepted: []string{"xpub", "zpub"}, hrp: "bc"},
	BitcoinTestnet:  {accepted: []string{"tpub", "vpub"}, hrp: "tb"},
	BitcoinRegtest:  {accepted: []string{"tpub", "vpub"}, hrp: "bcrt"},
	Litecoin:        {accepted: []string{"xpub", "zpub", "Ltub"}, hrp: "ltc"},
	LitecoinTestnet: {accepted: []string{"tpub", "vpub", "ttub"}, hrp: "tltc"},
	LitecoinRegtest: {accepted: []string{"tpub", "vpub", "ttub"}, hrp: "rltc"},
	Ethereum:        {accepted: []string{"xpub"}},
	Tron:            {accepted: []string{"xpub"}},
}

func lookupNetwork(n Network) (params, error) {
	p, ok := networks[n]
	if !ok {
		return params{}, fmt.Errorf("%w: %q", ErrUnknownNetwork, string(n))
	}
	return p, nil
}

// Account is a parsed account-level extended public key. It holds no secret
// and is immutable, so one Account can serve concurrent requests.
type Account struct {
	network  Network
	account  *hdkeychain.ExtendedKey // m/purpose'/coin'/account'
	external *hdkeychain.ExtendedKey // m/purpose'/coin'/account'/0, derived once
	internal *hdkeychain.ExtendedKey // m/purpose'/coin'/account'/1 (change), derived once
}

// ParseAccountKey parses the account-level extended public key a wallet
// exports for network. It refuses private keys, keys of another network or
// address type, and keys that are not at account level, because each of
// these would silently produce addresses the operator's wallet does not see.
func ParseAccountKey(network Network, extendedPublicKey string) (*Account, error) {
	p, err := lookupNetwork(network)
	if err != nil {
		return nil, err
	}
	// Configuration values often carry a trailing newline; nothing else is
	// forgiven.
	key, v, err := decodeExtendedPublicKey(strings.TrimSpace(extendedPublicKey))
	if err != nil {
		return nil, err
	}
	if !slices.Contains(p.accepted, v.prefix) {
		return nil, fmt.Errorf("%w: a %s key is not for %s (accepted: %s)", ErrWrongNetwork, v.prefix, network, strings.Join(p.accepted, ", "))
	}
	if key.Depth() != accountDepth {
		return nil, fmt.Errorf("%w: depth is %d, want %d (m/purpose'/coin'/account')", ErrNotAccountKey, key.Depth(), accountDepth)
	}
	if key.ChildIndex() < hdkeychain.HardenedKeyStart {
		return nil, fmt.Errorf("%w: the account level must be hardened (m/purpose'/coin'/account')", ErrNotAccountKey)
	}
	external, err := key.Derive(0)
	if err != nil {
		// Only ErrInvalidChild is possible here (probability below 2^-127);
		// the wallet would skip this account, so must we.
		return nil, fmt.Errorf("%w: external chain: %v", ErrInvalidKey, err)
	}
	internal, err := key.Derive(1)
	if err != nil {
		return nil, fmt.Errorf("%w: internal chain: %v", ErrInvalidKey, err)
	}
	return &Account{network: network, account: key, external: external, internal: internal}, nil
}

// decodeExtendedPublicKey decodes a serialized extended key without checking
// its depth, normalising its version bytes to xpub or tpub so that hdkeychain
// (which only knows BIP32's own versions) can derive from it.
func decodeExtendedPublicKey(s string) (*hdkeychain.ExtendedKey, keyVersion, error) {
	raw := base58.Decode(s)
	if len(raw) != serializedKeyLen+4 {
		return nil, keyVersion{}, fmt.Errorf("%w: not a serialized BIP32 key", ErrInvalidKey)
	}
	payload, sum := raw[:serializedKeyLen], raw[serializedKeyLen:]
	v, known := versions[binary.BigEndian.Uint32(payload[:4])]
	// Refuse a private key before anything else, even a mistyped one: the
	// operator must learn that a secret was pasted into the configuration.
	if known && v.kind == kindPrivate {
		return nil, v, ErrPrivateKey
	}
	if !bytes.Equal(sum, doubleSHA256(payload)[:4]) {
		return nil, v, fmt.Errorf("%w: bad checksum", ErrInvalidKey)
	}
	keyData := payload[45:78]
	if keyData[0] == 0x00 {
		// Private key data under a public version: still a private key.
		return nil, v, ErrPrivateKey
	}
	if !known {
		return nil, v, fmt.Errorf("%w: unknown version bytes %x", ErrInvalidKey, payload[:4])
	}
	if v.kind == kindOtherScript {
		return nil, v, fmt.Errorf("%w: %s keys describe P2SH-wrapped or multisig addresses; export the native segwit (BIP84) account key instead", ErrUnsupportedScript, v.prefix)
	}
	if _, err := btcec.ParsePubKey(keyData); err != nil {
		return nil, v, fmt.Errorf("%w: public key: %v", ErrInvalidKey, err)
	}
	depth := payload[4]
	parentFP := payload[5:9]
	childNum := binary.BigEndian.Uint32(payload[9:13])
	chainCode := payload[13:45]
	version := []byte{0x04, 0x88, 0xb2, 0x1e} // xpub
	if v.testnet {
		version = []byte{0x04, 0x35, 0x87, 0xcf} // tpub
	}
	key := hdkeychain.NewExtendedKey(version, bytes.Clone(keyData), bytes.Clone(chainCode), bytes.Clone(parentFP), depth, childNum, false)
	return key, v, nil
}

func doubleSHA256(b []byte) []byte {
	first := sha256.Sum256(b)
	second := sha256.Sum256(first[:])
	return second[:]
}

// Network returns the network the account derives addresses for.
func (a *Account) Network() Network { return a.network }

// Fingerprint returns the BIP32 fingerprint of the account key (the first
// four bytes of HASH160 of its public key, in hex). It identifies which key
// produced an address in logs and records without revealing the key, whose
// disclosure would expose every address of the account.
func (a *Account) Fingerprint() string {
	pub, err := a.account.ECPubKey()
	if err != nil {
		return ""
	}
	return hex.EncodeToString(btcutil.Hash160(pub.SerializeCompressed())[:4])
}

// String describes the account without the key itself, so that printing an
// Account in a log cannot leak it.
func (a *Account) String() string {
	return fmt.Sprintf("hdwallet.Account(%s, fingerprint %s)", a.network, a.Fingerprint())
}

// Address returns the receive address at index on the account's external
// chain (m/.../0/index). The same index always gives the same address, so
// the caller must persist and never reuse indexes. Indexes at or above 2^31
// are hardened and cannot be derived from a public key.
func (a *Account) Address(index uint32) (string, error) {
	return a.address(External, index)
}

// InternalAddress returns the change address at index on the account's
// internal chain (m/.../1/index): where a payout transaction sends its
// change, so that the operator's wallet sees it as its own change and the
// deposit addresses of the external chain are never reused.
func (a *Account) InternalAddress(index uint32) (string, error) {
	return a.address(Internal, index)
}

// The two BIP44 chains of an account.
const (
	External uint32 = 0 // receive addresses
	Internal uint32 = 1 // change addresses
)

// PublicKey returns the compressed public key at m/.../chain/index, which
// a PSBT names beside its derivation path so that a signer finds its key.
func (a *Account) PublicKey(chain, index uint32) ([]byte, error) {
	pub, err := a.publicKey(chain, index)
	if err != nil {
		return nil, err
	}
	return pub.SerializeCompressed(), nil
}

func (a *Account) publicKey(chain, index uint32) (*btcec.PublicKey, error) {
	if index >= hdkeychain.HardenedKeyStart {
		return nil, fmt.Errorf("%w: %d", ErrIndexOutOfRange, index)
	}
	parent := a.external
	switch chain {
	case External:
	case Internal:
		parent = a.internal
	default:
		return nil, fmt.Errorf("hdwallet: chain %d is neither external (0) nor internal (1)", chain)
	}
	child, err := parent.Derive(index)
	if err != nil {
		// ErrInvalidChild (probability below 2^-127): BIP32 says skip the
		// index, which the caller does by taking the next one.
		return nil, fmt.Errorf("hdwallet: index %d: %w", index, err)
	}
	pub, err := child.ECPubKey()
	if err != nil {
		return nil, fmt.Errorf("hdwallet: index %d: %w", index, err)
	}
	return pub, nil
}

func (a *Account) address(chain, index uint32) (string, error) {
	pub, err := a.publicKey(chain, index)
	if err != nil {
		return "", err
	}
	switch a.network {
	case Ethereum:
		return evmAddress(pub).Hex(), nil
	case Tron:
		return TronAddressFromEVM(evmAddress(pub)), nil
	default:
		return p2wpkhAddress(networks[a.network].hrp, btcutil.Hash160(pub.SerializeCompressed()))
	}
}
