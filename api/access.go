package api

import (
	"context"
	"crypto/rsa"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/domain"
)

// ownerAccessStore hands out a generated private key, by an explicit
// reveal only (Deps.OwnerAccess: postgres.Store, which holds the keyring).
type ownerAccessStore interface {
	RevealPrivateKey(ctx context.Context, ref string) (key string, shownAt time.Time, err error)
}

// revealPrivateKey hands the owner the private key generated for the
// order (SSH driver, no public key given), starting its display window. A
// POST, with the CSRF token for cookie sessions: reading the order (a GET,
// which any site can trigger by navigation) never starts the window.
func (s *Server) revealPrivateKey(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	key, shownAt, err := s.RevealPrivateKey(c.Request.Context(), customer(c), c.Param("ref"))
	s.answer(c, http.StatusOK, gin.H{"private_key": key, "private_key_shown_at": shownAt}, err)
}

// availabilityStore tells whether a configuration could be served now, and
// whether any host could ever serve it (Deps.Availability: postgres.Store).
type availabilityStore interface {
	Availability(ctx context.Context, model string, gpus, gpusPerLot int) (domain.Availability, error)
	CheckFits(ctx context.Context, model string, gpus, gpusPerLot int) error
}

// quoteWithAvailability is a quote and whether it could be served now.
type quoteWithAvailability struct {
	quoteResponse
	Availability *domain.Availability `json:"availability,omitempty"`
}

// withAvailability adds availability to a quote when the store knows it. A
// failure to read it is logged and leaves it out: the price stands anyway.
func (s *Server) withAvailability(ctx context.Context, q quoteResponse) quoteWithAvailability {
	out := quoteWithAvailability{quoteResponse: q}
	if s.availability == nil {
		return out
	}
	a, err := s.availability.Availability(ctx, q.Model, q.TotalGPUs, q.GPUsPerLot)
	if err != nil {
		s.log.Warn("availability unknown", "model", q.Model, "err", err)
		return out
	}
	out.Availability = &a
	return out
}

// orderRequest is a configuration plus the customer's own SSH public key
// (fields spelled out, so a decoding error names the JSON field itself).
type orderRequest struct {
	Model        string `json:"gpu_model"`
	Lots         int    `json:"lots"`
	DurationDays int    `json:"duration_days"`
	Preset       string `json:"preset"`
	SSHPublicKey string `json:"ssh_public_key"`
}

func (r orderRequest) configuration() domain.Configuration {
	return domain.Configuration{Model: r.Model, Lots: r.Lots, DurationDays: r.DurationDays, Preset: r.Preset}
}

// maxSSHKeyLen bounds the key field (an RSA 16384 key fits).
const maxSSHKeyLen = 16 << 10

// validSSHKey checks a public key in authorized_keys form and returns it
// normalised to "type base64 [comment]", without options: it is written to
// the host's authorized_keys, where options could open more than a login.
func validSSHKey(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", nil
	}
	bad := domain.FieldError("ssh_public_key",
		"La clé publique SSH est invalide : collez une seule ligne « ssh-ed25519 AAAA… » (ou ecdsa, ou rsa de 2048 bits et plus), sans options.")
	if len(raw) > maxSSHKeyLen || strings.ContainsAny(raw, "\r\n") {
		return "", bad
	}
	pk, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(raw))
	if err != nil || len(options) > 0 || len(rest) > 0 {
		return "", bad
	}
	if ck, ok := pk.(ssh.CryptoPublicKey); ok {
		if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < 2048 {
			return "", bad
		}
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	// The comment is kept only if it is plain text.
	if comment = strings.TrimSpace(comment); comment != "" && len(comment) <= 200 && !strings.ContainsAny(comment, "'\"`$\\") {
		line += " " + comment
	}
	return line, nil
}
