package hdwallet

import (
	"crypto/sha256"
	"encoding/hex"
)

// KeyDigest identifies the account key exactly: the SHA-256 of its
// compressed public key and chain code, in hex (every address derives from
// both). Fingerprint is for people to compare; it is 4 bytes, which a key
// made on purpose can match, so a stored key is checked by its digest.
func (a *Account) KeyDigest() string {
	pub, err := a.account.ECPubKey()
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write(pub.SerializeCompressed())
	h.Write(a.account.ChainCode())
	return hex.EncodeToString(h.Sum(nil))
}
