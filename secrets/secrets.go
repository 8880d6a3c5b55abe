// Package secrets seals small secrets (access passwords, generated private
// keys, Jupyter tokens, Temporal payloads) with AES-256-GCM under a keyring
// read from configuration: "id:base64key,id2:base64key2". The first key
// seals; every key opens, so a key can be rotated in by putting the new one
// first and rotated out once nothing sealed with it remains.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefix marks a sealed string, so a stored value says how to read it.
const Prefix = "kdsec1:"

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Keyring holds the sealing keys. The zero value is unusable; build one
// with Parse or New.
type Keyring struct {
	primary string
	aeads   map[string]cipher.AEAD
	order   []string
}

// Key is one named key.
type Key struct {
	ID  string
	Raw []byte
}

// New builds a keyring from keys, the first one sealing. Its errors name a
// key by its ID once the ID is valid, never by its bytes.
func New(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("secrets: no key")
	}
	k := &Keyring{primary: keys[0].ID, aeads: map[string]cipher.AEAD{}}
	for i, key := range keys {
		if !keyIDPattern.MatchString(key.ID) {
			// Not quoted: a malformed ID may be key material pasted in
			// the wrong place.
			return nil, fmt.Errorf("secrets: key %d: %s", i+1, errKeyID)
		}
		if len(key.Raw) != KeySize {
			return nil, fmt.Errorf("secrets: key %q is %d bytes, want %d", key.ID, len(key.Raw), KeySize)
		}
		if _, dup := k.aeads[key.ID]; dup {
			return nil, fmt.Errorf("secrets: key id %q given twice", key.ID)
		}
		block, err := aes.NewCipher(key.Raw)
		if err != nil {
			return nil, fmt.Errorf("secrets: key %q: %w", key.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secrets: key %q: %w", key.ID, err)
		}
		k.aeads[key.ID] = aead
		k.order = append(k.order, key.ID)
	}
	return k, nil
}

// errKeyID says what a key ID must be.
const errKeyID = "the id (before ':') must be 1-32 characters among A-Z a-z 0-9 _ -"

// Parse reads "id:base64key,id2:base64key2" (standard base64 of 32 bytes).
// Its errors (printed at startup, kept in the journal) say which entry is
// wrong (its position, from 1, and its ID when the ID is valid) and why,
// and never contain any of the value's characters beyond a valid ID: not
// the key, nor an entry without its ':', which may be a key alone.
func Parse(spec string) (*Keyring, error) {
	var keys []Key
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n := i + 1
		id, b64, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("secrets: entry %d: no ':' (want id:base64key)", n)
		}
		if !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("secrets: entry %d: %s", n, errKeyID)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			// base64's error is only an offset, but say it in our words.
			var corrupt base64.CorruptInputError
			if errors.As(err, &corrupt) {
				return nil, fmt.Errorf("secrets: entry %d (id %q): the key is not standard base64 (wrong at character %d of %d)", n, id, int64(corrupt)+1, len(b64))
			}
			return nil, fmt.Errorf("secrets: entry %d (id %q): the key is not standard base64", n, id)
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("secrets: entry %d (id %q): the key is %d bytes, want %d (kernodeck keygen makes one)", n, id, len(raw), KeySize)
		}
		keys = append(keys, Key{ID: id, Raw: raw})
	}
	if len(keys) == 0 {
		return nil, errors.New("secrets: no key (want id:base64key,...)")
	}
	return New(keys...)
}

// Generate returns a new random key spec "id:base64key", for operators and
// for `dev`.
func Generate(id string) string {
	raw := make([]byte, KeySize)
	_, _ = rand.Read(raw) // never fails on Linux
	return id + ":" + base64.StdEncoding.EncodeToString(raw)
}

// PrimaryID is the ID of the sealing key.
func (k *Keyring) PrimaryID() string { return k.primary }

// SealBytes encrypts plaintext with the primary key. aad binds the result to
// its place (e.g. "order_access.password:KD-..."), so a ciphertext copied to
// another row does not open. Output: nonce || ciphertext.
func (k *Keyring) SealBytes(plaintext, aad []byte) (keyID string, sealed []byte) {
	aead := k.aeads[k.primary]
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return k.primary, aead.Seal(nonce, nonce, plaintext, aad)
}

// OpenBytes decrypts what SealBytes produced with the key keyID.
func (k *Keyring) OpenBytes(keyID string, sealed, aad []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("secrets: unknown key %q (was it removed from the keyring too early?)", keyID)
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("secrets: sealed value too short")
	}
	nonce, ct := sealed[:aead.NonceSize()], sealed[aead.NonceSize():]
	pt, err := aead.Open(nil, nonce, ct, aad)
	if err != nil {
		return nil, fmt.Errorf("secrets: open with key %q: %w", keyID, err)
	}
	return pt, nil
}

// Seal returns "kdsec1:<key id>:<base64>" for a string secret.
func (k *Keyring) Seal(plaintext, aad string) string {
	id, sealed := k.SealBytes([]byte(plaintext), []byte(aad))
	return Prefix + id + ":" + base64.RawStdEncoding.EncodeToString(sealed)
}

// Open reverses Seal.
func (k *Keyring) Open(value, aad string) (string, error) {
	rest, ok := strings.CutPrefix(value, Prefix)
	if !ok {
		return "", errors.New("secrets: value is not sealed")
	}
	id, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return "", errors.New("secrets: malformed sealed value")
	}
	sealed, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("secrets: malformed sealed value: %w", err)
	}
	pt, err := k.OpenBytes(id, sealed, []byte(aad))
	if err != nil {
		return "", err
	}
	return string(pt), nil
}

// IsSealed reports whether a stored value was produced by Seal.
func IsSealed(value string) bool { return strings.HasPrefix(value, Prefix) }

// KeyID returns the key a sealed value was sealed with ("" if not sealed),
// so operators can tell when an old key is no longer needed.
func KeyID(value string) string {
	rest, ok := strings.CutPrefix(value, Prefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ":")
	return id
}
