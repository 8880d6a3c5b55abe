// Package mailverify makes and checks the links that confirm a customer's
// email address. A link carries the account, the address and an expiry,
// sealed with the secrets keyring (AES-256-GCM, which authenticates what it
// seals): nobody without a key of the ring can make one, a link changed by
// one bit does not open, and a link made for one address does not confirm
// another. Any key of the ring opens a link, so key rotation keeps the
// links already mailed working.
package mailverify

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/secrets"
)

// DefaultTTL is how long a link works after its mail was sent.
const DefaultTTL = 48 * time.Hour

// aad binds a sealed link to this use: nothing else sealed with the ring
// (access passwords, Temporal payloads) opens as a link, nor the reverse.
const aad = "kernodeck/email-verification/v1"

// maxTokenLen bounds what Check decodes (an address is at most 254 bytes).
const maxTokenLen = 1024

// Errors answered for a link that cannot confirm anything.
var (
	ErrInvalid = &domain.Error{Code: domain.ECodeVerificationInvalid,
		Message: "Ce lien de confirmation n'est pas valide. Ouvrez le lien reçu par email tel quel, ou connectez-vous pour en demander un nouveau."}
	ErrExpired = &domain.Error{Code: domain.ECodeVerificationExpired,
		Message: "Ce lien de confirmation a expiré. Connectez-vous pour en demander un nouveau."}
)

// Signer makes and checks links. Keyring is required.
type Signer struct {
	Keyring *secrets.Keyring
	// TTL is a link's lifetime (DefaultTTL when zero).
	TTL time.Duration
	// Now is the clock (time.Now when nil); tests move it.
	Now func() time.Time
}

// Claim is what a valid link says.
type Claim struct {
	AccountID int64
	Email     string // lower-cased
	ExpiresAt time.Time
}

func (s *Signer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Signer) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultTTL
}

// Token returns a link token for the account's address, valid until
// expires. It is URL-safe: "<key id>.<base64url>".
func (s *Signer) Token(accountID int64, email string) (token string, expires time.Time) {
	expires = s.now().Add(s.ttl()).UTC().Truncate(time.Second)
	plain := make([]byte, 16, 16+len(email))
	binary.BigEndian.PutUint64(plain[0:8], uint64(accountID))
	binary.BigEndian.PutUint64(plain[8:16], uint64(expires.Unix()))
	plain = append(plain, strings.ToLower(strings.TrimSpace(email))...)
	id, sealed := s.Keyring.SealBytes(plain, []byte(aad))
	return id + "." + base64.RawURLEncoding.EncodeToString(sealed), expires
}

// Check opens token: ErrInvalid if it was not made by Token with a key of
// the ring (forged, altered, truncated), ErrExpired past its expiry.
func (s *Signer) Check(token string) (Claim, error) {
	if token == "" || len(token) > maxTokenLen {
		return Claim{}, ErrInvalid
	}
	id, b64, ok := strings.Cut(token, ".")
	if !ok {
		return Claim{}, ErrInvalid
	}
	sealed, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return Claim{}, ErrInvalid
	}
	plain, err := s.Keyring.OpenBytes(id, sealed, []byte(aad))
	if err != nil || len(plain) < 17 {
		return Claim{}, ErrInvalid
	}
	c := Claim{
		AccountID: int64(binary.BigEndian.Uint64(plain[0:8])),
		ExpiresAt: time.Unix(int64(binary.BigEndian.Uint64(plain[8:16])), 0).UTC(),
		Email:     string(plain[16:]),
	}
	if c.AccountID <= 0 {
		return Claim{}, ErrInvalid
	}
	if !s.now().Before(c.ExpiresAt) {
		return Claim{}, ErrExpired
	}
	return c, nil
}

// IsLinkError reports whether err is one of the link errors above.
func IsLinkError(err error) bool { return errors.Is(err, ErrInvalid) || errors.Is(err, ErrExpired) }
