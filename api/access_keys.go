package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// keyRequestStore records key changes for the worker to apply on the host
// (Deps.KeyRequests: postgres.DB): the API never logs in to hosts.
type keyRequestStore interface {
	RequestKeyChange(ctx context.Context, orderRef, kind, publicKey string) (domain.KeyRequest, error)
	LatestKeyRequest(ctx context.Context, orderRef string) (domain.KeyRequest, error)
}

// errNoKeyChanges: no key changes (Deps.KeyRequests nil).
var errNoKeyChanges = domain.Errorf(domain.ECodeConflict, "Le changement de clé n'est pas disponible sur ce serveur.")

// replaceSSHKey asks for the customer's new public key to replace the
// current one on their running rental (a lost key): applied on the host
// by the worker; from then on the old key is refused.
func (s *Server) replaceSSHKey(c *gin.Context) {
	var req struct {
		SSHPublicKey string `json:"ssh_public_key"`
	}
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	kr, err := s.RequestKeyChange(c.Request.Context(), customer(c), c.Param("ref"), domain.KeyRequestReplace, req.SSHPublicKey)
	s.answer(c, http.StatusAccepted, gin.H{"key_request": kr}, err)
}

// reissueSSHKey asks for a new generated key pair: its private key is then
// revealed again (POST /v1/orders/{ref}/private-key), the old key refused.
func (s *Server) reissueSSHKey(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	kr, err := s.RequestKeyChange(c.Request.Context(), customer(c), c.Param("ref"), domain.KeyRequestReissue, "")
	s.answer(c, http.StatusAccepted, gin.H{"key_request": kr}, err)
}

// getKeyRequest shows the order's last key change and where it stands.
func (s *Server) getKeyRequest(c *gin.Context) {
	kr, err := s.KeyRequest(c.Request.Context(), customer(c), c.Param("ref"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"key_request": kr})
}
