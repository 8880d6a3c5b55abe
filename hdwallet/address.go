package hdwallet

import (
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil/base58"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// ErrChecksum: the address is well formed but its checksum (base58check,
// bech32, EIP-55) does not match, which is what a mistyped or badly copied
// address gives. It wraps ErrInvalidAddress.
var ErrChecksum = fmt.Errorf("%w: checksum mismatch", ErrInvalidAddress)

// invalidBase58 classifies a base58check decoding error of s: a checksum
// mismatch only counts as one for a string of the right length (version,
// 20 bytes, checksum), not for something else in base58 (a Solana key).
func invalidBase58(what, s string, err error) error {
	if errors.Is(err, base58.ErrChecksum) && len(base58.Decode(s)) == 1+20+4 {
		return fmt.Errorf("%w: %s", ErrChecksum, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrInvalidAddress, what, err)
}

// tronPrefix is the byte Tron puts before the 20-byte account hash; it makes
// every mainnet address start with "T" once base58check encoded.
const tronPrefix = 0x41

// p2wpkhAddress encodes a witness version 0 key hash (BIP141 P2WPKH) as a
// BIP173 bech32 address with the network's human-readable part.
func p2wpkhAddress(hrp string, keyHash []byte) (string, error) {
	prog, err := bech32.ConvertBits(keyHash, 8, 5, true)
	if err != nil {
		return "", fmt.Errorf("hdwallet: bech32: %w", err)
	}
	addr, err := bech32.Encode(hrp, append([]byte{0}, prog...))
	if err != nil {
		return "", fmt.Errorf("hdwallet: bech32: %w", err)
	}
	return addr, nil
}

// evmAddress is the last 20 bytes of Keccak-256 of the uncompressed public
// key without its 0x04 prefix, as Ethereum and Tron both define accounts.
func evmAddress(pub *btcec.PublicKey) common.Address {
	return common.BytesToAddress(crypto.Keccak256(pub.SerializeUncompressed()[1:])[12:])
}

// TronAddressFromEVM returns the Tron "T..." address of a 20-byte account:
// base58check(0x41 || address). Tron's TRC-20 Transfer logs carry the
// 20-byte form, so the watcher needs this to match them to deposit addresses.
func TronAddressFromEVM(a common.Address) string {
	return base58.CheckEncode(a.Bytes(), tronPrefix)
}

// EthereumAddressOfTron returns the 20-byte account of a Tron "T..." address,
// the form found in TRC-20 logs and contract calls. It checks the base58check
// checksum and the 0x41 prefix, so a mistyped address is refused rather than
// mapped to some other account.
func EthereumAddressOfTron(t string) (common.Address, error) {
	payload, version, err := base58.CheckDecode(t)
	if err != nil {
		return common.Address{}, invalidBase58("tron", t, err)
	}
	if version != tronPrefix || len(payload) != common.AddressLength {
		return common.Address{}, fmt.Errorf("%w: tron: not a Tron account address", ErrInvalidAddress)
	}
	return common.BytesToAddress(payload), nil
}

// base58Versions lists the base58check version bytes of P2PKH and P2SH
// addresses per network (Bitcoin Core and Litecoin Core chainparams).
// Litecoin keeps Bitcoin's P2SH byte (3... / 2...) beside its own M... / Q...
// because older wallets still show those. The first byte of each list is
// the P2PKH one, the others P2SH (OutputScript relies on it).
var base58Versions = map[Network][]byte{
	Bitcoin:         {0x00, 0x05},
	BitcoinTestnet:  {0x6f, 0xc4},
	BitcoinRegtest:  {0x6f, 0xc4},
	Litecoin:        {0x30, 0x32, 0x05},
	LitecoinTestnet: {0x6f, 0x3a, 0xc4},
	LitecoinRegtest: {0x6f, 0x3a, 0xc4},
}

// ValidateAddress reports whether s is a valid address to send to on
// network: any standard output for Bitcoin and Litecoin (P2PKH, P2SH, segwit
// v0 and v1+), an Ethereum address (EIP-55 checksummed if mixed case), a
// Tron T-address, or a Solana address (32 bytes in base58). It checks
// checksums and networks, not that the address is in use; the error wraps
// ErrInvalidAddress or ErrUnknownNetwork.
func ValidateAddress(network Network, s string) error {
	switch network {
	case Ethereum:
		return validateEVM(s)
	case Tron:
		_, err := EthereumAddressOfTron(s)
		return err
	case Solana:
		_, err := SolanaPublicKey(s)
		return err
	}
	_, err := OutputScript(network, s)
	return err
}

// OutputScript returns the output script (scriptPubKey) that pays the
// Bitcoin or Litecoin address s on network, after the checks of
// ValidateAddress: a transaction is built, and checked, by its scripts, the
// form in which two spellings of one address (bech32 in either case) are
// one.
func OutputScript(network Network, s string) ([]byte, error) {
	p, err := lookupNetwork(network)
	if err != nil {
		return nil, err
	}
	if p.hrp == "" {
		return nil, fmt.Errorf("%w: %s has no output scripts", ErrUnknownNetwork, network)
	}
	if strings.HasPrefix(strings.ToLower(s), p.hrp+"1") {
		version, program, err := decodeSegwit(p.hrp, s)
		if err != nil {
			return nil, err
		}
		// OP_0 or OP_1..OP_16, then a push of the program (2 to 40 bytes).
		op := byte(0x00)
		if version > 0 {
			op = 0x50 + version
		}
		return append([]byte{op, byte(len(program))}, program...), nil
	}
	payload, version, err := base58.CheckDecode(s)
	if err != nil {
		return nil, invalidBase58(string(network), s, err)
	}
	if len(payload) != 20 {
		return nil, fmt.Errorf("%w: not a %s address", ErrInvalidAddress, network)
	}
	for i, v := range base58Versions[network] {
		if v != version {
			continue
		}
		if i == 0 { // P2PKH: OP_DUP OP_HASH160 <20> OP_EQUALVERIFY OP_CHECKSIG
			return append(append([]byte{0x76, 0xa9, 20}, payload...), 0x88, 0xac), nil
		}
		// P2SH: OP_HASH160 <20> OP_EQUAL
		return append(append([]byte{0xa9, 20}, payload...), 0x87), nil
	}
	return nil, fmt.Errorf("%w: base58 address of another network than %s", ErrInvalidAddress, network)
}

// IsLegacyScriptHashVersion reports whether the base58 address s uses a
// P2SH version byte that network shares with Bitcoin (Litecoin's 3... and
// 2... addresses): valid, but the same string is a Bitcoin address too.
func IsLegacyScriptHashVersion(network Network, s string) bool {
	if network != Litecoin && network != LitecoinTestnet && network != LitecoinRegtest {
		return false
	}
	_, version, err := base58.CheckDecode(s)
	return err == nil && (version == 0x05 || version == 0xc4)
}

// SolanaPublicKey decodes a Solana address: the base58 form of a 32-byte
// ed25519 public key (or of a program-derived address, which is not on the
// curve; callers that need a wallet key check that themselves).
func SolanaPublicKey(s string) ([]byte, error) {
	if len(s) < 32 || len(s) > 44 {
		return nil, fmt.Errorf("%w: solana: not 32 to 44 base58 characters", ErrInvalidAddress)
	}
	key := base58.Decode(s)
	// base58.Decode answers nil for a character outside the alphabet, and
	// the length check catches the rest (a leading "1" is a zero byte).
	if len(key) != 32 || base58.Encode(key) != s {
		return nil, fmt.Errorf("%w: solana: not the base58 form of 32 bytes", ErrInvalidAddress)
	}
	return key, nil
}

// decodeSegwit applies BIP173 and BIP350: version 0 programs use bech32
// and are 20 or 32 bytes; versions 1 to 16 use bech32m and are 2 to 40 bytes.
func decodeSegwit(hrp, s string) (version byte, program []byte, err error) {
	gotHRP, data, enc, err := bech32.DecodeGeneric(s)
	if errors.As(err, new(bech32.ErrInvalidChecksum)) {
		return 0, nil, fmt.Errorf("%w: bech32", ErrChecksum)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: bech32: %v", ErrInvalidAddress, err)
	}
	if gotHRP != hrp || len(data) < 1 {
		return 0, nil, fmt.Errorf("%w: not a %s segwit address", ErrInvalidAddress, hrp)
	}
	witnessVersion := data[0]
	prog, err := bech32.ConvertBits(data[1:], 5, 8, false)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: bech32 program: %v", ErrInvalidAddress, err)
	}
	if err := checkWitnessProgram(witnessVersion, prog, enc); err != nil {
		return 0, nil, err
	}
	return witnessVersion, prog, nil
}

func checkWitnessProgram(witnessVersion byte, prog []byte, enc bech32.Version) error {
	switch {
	case witnessVersion > 16:
		return fmt.Errorf("%w: witness version %d", ErrInvalidAddress, witnessVersion)
	case len(prog) < 2 || len(prog) > 40:
		return fmt.Errorf("%w: witness program of %d bytes", ErrInvalidAddress, len(prog))
	case witnessVersion == 0 && enc != bech32.Version0:
		return fmt.Errorf("%w: witness version 0 must use bech32", ErrInvalidAddress)
	case witnessVersion == 0 && len(prog) != 20 && len(prog) != 32:
		return fmt.Errorf("%w: witness v0 program of %d bytes", ErrInvalidAddress, len(prog))
	case witnessVersion != 0 && enc != bech32.VersionM:
		return fmt.Errorf("%w: witness version %d must use bech32m", ErrInvalidAddress, witnessVersion)
	}
	return nil
}

// validateEVM accepts 0x followed by 40 hex digits. All-lowercase and
// all-uppercase forms carry no checksum (EIP-55) and are accepted; a mixed
// case address must match its checksum, which catches most typos.
func validateEVM(s string) error {
	if len(s) != 42 || !strings.HasPrefix(s, "0x") || !common.IsHexAddress(s) {
		return fmt.Errorf("%w: not an Ethereum address", ErrInvalidAddress)
	}
	digits := s[2:]
	if digits == strings.ToLower(digits) || digits == strings.ToUpper(digits) {
		return nil
	}
	if common.HexToAddress(s).Hex() != s {
		return fmt.Errorf("%w: EIP-55", ErrChecksum)
	}
	return nil
}
