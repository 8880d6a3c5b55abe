package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// keyRequestStore records key changes for the worker to apply on the host
// (postgres.DB): the API never logs in to hosts.
type keyRequestStore interface {
	RequestKeyChange(ctx context.Context, orderRef, kind, publicKey string) (domain.KeyRequest, error)
	LatestKeyRequest(ctx context.Context, orderRef string) (domain.KeyRequest, error)
}

func (s *Server) keyRequests(c *gin.Context) (keyRequestStore, bool) {
	st, ok := s.store.(keyRequestStore)
	if !ok {
		s.fail(c, domain.Errorf(domain.ECodeConflict, "Le changement de clé n'est pas disponible sur ce serveur."))
	}
	return st, ok
}

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
	key, err := validSSHKey(req.SSHPublicKey)
	if err == nil && key == "" {
		err = domain.FieldError("ssh_public_key", "Collez la nouvelle clé publique SSH.")
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.requestKeyChange(c, domain.KeyRequestReplace, key)
}

// reissueSSHKey asks for a new generated key pair: its private key is then
// revealed again (POST /v1/orders/{ref}/private-key), the old key refused.
func (s *Server) reissueSSHKey(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	s.requestKeyChange(c, domain.KeyRequestReissue, "")
}

func (s *Server) requestKeyChange(c *gin.Context, kind, key string) {
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	st, ok := s.keyRequests(c)
	if !ok {
		return
	}
	kr, err := st.RequestKeyChange(c.Request.Context(), o.Ref, kind, key)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"key_request": kr})
}

// getKeyRequest shows the order's last key change and where it stands.
func (s *Server) getKeyRequest(c *gin.Context) {
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	st, ok := s.keyRequests(c)
	if !ok {
		return
	}
	kr, err := st.LatestKeyRequest(c.Request.Context(), o.Ref)
	if err != nil {
		s.fail(c, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Aucun changement de clé pour cette commande.")))
		return
	}
	c.JSON(http.StatusOK, gin.H{"key_request": kr})
}
