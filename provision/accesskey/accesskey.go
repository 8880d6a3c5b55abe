// Package accesskey generates the SSH key pair a customer gets when they
// gave no public key of their own: both provisioning drivers hand it out
// the same way (sealed on the order's access, revealed once to the owner).
package accesskey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"

	"golang.org/x/crypto/ssh"
)

// New returns an ed25519 key pair: the OpenSSH PEM private key and the
// authorized_keys line (with comment).
func New(comment string) (privPEM, authorized string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return "", "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(block)), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment, nil
}

// Comment names an order's generated key.
func Comment(orderRef string) string { return "kernodeck-" + strings.ToLower(orderRef) }
