package tron

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/base58"
)

// addressPrefix is the first byte of every Tron account address: a Tron
// address is 0x41 followed by the 20-byte EVM address, and its text form
// (T...) is the base58check of those 21 bytes (double-SHA256 checksum, the
// same construction as Bitcoin's, with 0x41 as the version byte).
const addressPrefix = 0x41

// Address returns the T-address of a 20-byte account (EVM) address.
func Address(evm [20]byte) string {
	return base58.CheckEncode(evm[:], addressPrefix)
}

// ParseAddress reads a Tron address in any of the forms the HTTP API and
// configuration use: base58check ("T..."), 21-byte hex with the 41 prefix
// (what the API returns without "visible"), or a 20-byte EVM hex address
// (with or without 0x, as in TRC-20 logs).
func ParseAddress(s string) ([20]byte, error) {
	var out [20]byte
	if strings.HasPrefix(s, "T") {
		payload, version, err := base58.CheckDecode(s)
		if err != nil {
			return out, fmt.Errorf("tron address %q: %w", s, err)
		}
		if version != addressPrefix || len(payload) != 20 {
			return out, fmt.Errorf("tron address %q: not a 0x41 account address", s)
		}
		copy(out[:], payload)
		return out, nil
	}
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	b, err := hex.DecodeString(h)
	if err != nil {
		return out, fmt.Errorf("tron address %q: %w", s, err)
	}
	switch {
	case len(b) == 21 && b[0] == addressPrefix:
		b = b[1:]
	case len(b) != 20:
		return out, fmt.Errorf("tron address %q: %d bytes", s, len(b))
	}
	copy(out[:], b)
	return out, nil
}

// hexToAddress converts the API's 41-prefixed hex address to a T-address.
func hexToAddress(h string) (string, error) {
	a, err := ParseAddress(h)
	if err != nil {
		return "", err
	}
	return Address(a), nil
}
