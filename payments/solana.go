package payments

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"

	"github.com/mr-tron/base58"
)

// newSolanaReference returns a fresh Solana Pay reference: a random ed25519
// public key, base58-encoded, added by the wallet to the transfer's accounts
// so the watcher can find the transaction by it.
func newSolanaReference() (string, error) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("solana reference: %w", err)
	}
	return base58.Encode(pub), nil
}
