package hdwallet

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
)

// ErrInvalidOrigin: a key origin is malformed or does not match the
// account key it is given for.
var ErrInvalidOrigin = errors.New("hdwallet: invalid key origin")

// KeyOrigin is where an account key sits in the wallet that holds its
// private key: the master key's fingerprint and the account's path from it,
// written as output descriptors write it, "[d34db33f/84'/2'/0']". An
// extended public key does not carry either (only its parent's fingerprint
// and its own child number), yet a PSBT must name both for each input so
// that a descriptor or hardware wallet finds the key that signs it.
type KeyOrigin struct {
	Fingerprint [4]byte
	Path        []uint32 // hardened elements have HardenedKeyStart added
}

// ParseKeyOrigin parses "[fingerprint/path]" (the brackets optional),
// with ' or h marking hardened elements. An account's origin is three
// hardened elements (m/purpose'/coin'/account'); anything else is refused,
// as ParseAccountKey refuses keys that are not at account level.
func ParseKeyOrigin(s string) (KeyOrigin, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") != strings.HasSuffix(s, "]") {
		return KeyOrigin{}, fmt.Errorf("%w: unbalanced brackets", ErrInvalidOrigin)
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	parts := strings.Split(s, "/")
	fp, err := hex.DecodeString(parts[0])
	if err != nil || len(fp) != 4 {
		return KeyOrigin{}, fmt.Errorf("%w: the master fingerprint must be 8 hex digits (as in [d34db33f/84'/0'/0'])", ErrInvalidOrigin)
	}
	var o KeyOrigin
	copy(o.Fingerprint[:], fp)
	for _, e := range parts[1:] {
		hardened := strings.HasSuffix(e, "'") || strings.HasSuffix(e, "h")
		n, err := strconv.ParseUint(strings.TrimRight(e, "'h"), 10, 31)
		if err != nil || !hardened {
			return KeyOrigin{}, fmt.Errorf("%w: path element %q: want a hardened index such as 84' or 84h", ErrInvalidOrigin, e)
		}
		o.Path = append(o.Path, uint32(n)+hdkeychain.HardenedKeyStart)
	}
	if len(o.Path) != accountDepth {
		return KeyOrigin{}, fmt.Errorf("%w: the path has %d elements, want %d (m/purpose'/coin'/account')", ErrInvalidOrigin, len(o.Path), accountDepth)
	}
	return o, nil
}

// String writes the origin back in descriptor form, with ' for hardened.
func (o KeyOrigin) String() string {
	var b strings.Builder
	b.WriteString("[" + hex.EncodeToString(o.Fingerprint[:]))
	for _, e := range o.Path {
		b.WriteString("/" + formatPathElement(e))
	}
	b.WriteString("]")
	return b.String()
}

func formatPathElement(e uint32) string {
	if e >= hdkeychain.HardenedKeyStart {
		return strconv.FormatUint(uint64(e-hdkeychain.HardenedKeyStart), 10) + "'"
	}
	return strconv.FormatUint(uint64(e), 10)
}

// FingerprintUint32 is the fingerprint as btcutil/psbt stores it (the four
// bytes read little-endian, which serialises them back in order).
func (o KeyOrigin) FingerprintUint32() uint32 {
	return binary.LittleEndian.Uint32(o.Fingerprint[:])
}

// KeyPath is the full path of the key at m/.../chain/index under the
// origin, as a PSBT's BIP32 derivation names it.
func (o KeyOrigin) KeyPath(chain, index uint32) []uint32 {
	return append(append(make([]uint32, 0, len(o.Path)+2), o.Path...), chain, index)
}

// FormatPath writes a full path as "m/84'/2'/0'/1/5", for messages and docs.
func FormatPath(path []uint32) string {
	var b strings.Builder
	b.WriteString("m")
	for _, e := range path {
		b.WriteString("/" + formatPathElement(e))
	}
	return b.String()
}

// CheckOrigin reports whether o can be the origin of the account key: the
// key's depth is the path's length and its child number the path's last
// element. (The master fingerprint cannot be checked from an account key:
// only the wallet that signs can, and it ignores a PSBT that names another.)
func (a *Account) CheckOrigin(o KeyOrigin) error {
	if int(a.account.Depth()) != len(o.Path) {
		return fmt.Errorf("%w: the key is at depth %d, the origin's path has %d elements", ErrInvalidOrigin, a.account.Depth(), len(o.Path))
	}
	if last := o.Path[len(o.Path)-1]; a.account.ChildIndex() != last {
		return fmt.Errorf("%w: the key is account %s, the origin says %s", ErrInvalidOrigin,
			formatPathElement(a.account.ChildIndex()), formatPathElement(last))
	}
	return nil
}
