package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/provision/sshhost"
)

// HostOperator is the SSH driver's inventory as operators work it: the
// same code as `kernodeck hosts` (sshhost.Operations).
type HostOperator interface {
	List(ctx context.Context) ([]sshhost.Host, error)
	Repair(ctx context.Context, name, note string) error
	Retire(ctx context.Context, name, note string) error
}

// supportHostList is GET /v1/support/hosts.
type supportHostList struct {
	Hosts []sshhost.Host `json:"hosts"`
	// Actions are the operators' actions on hosts, oldest first.
	Actions []domain.SupportAction `json:"actions"`
}

// SupportHostList is GET /v1/support/hosts (the console decodes it).
type SupportHostList = supportHostList

var (
	errNoHostInventory = domain.Errorf(domain.ECodeNoHostInventory,
		"Aucun inventaire d'hôtes : les machines ne sont pas gérées par le pilote SSH (KERNODECK_PROVISIONER).")
	errHostNotFound = domain.Errorf(domain.ECodeNotFound, "Hôte introuvable.")
	errHostBusy     = domain.Errorf(domain.ECodeHostBusy,
		"Une commande occupe cet hôte : retirez-le de la rotation et attendez la fin de la location.")
)

// hostTarget is the audit log's target of a host.
func hostTarget(name string) string { return domain.HostTargetPrefix + name }

// supportHosts lists the inventory (state and note, the order holding a
// host, the last release check) with the operators' actions on hosts.
func (s *Server) supportHosts(c *gin.Context) {
	l, err := s.SupportHosts(c.Request.Context(), agentOf(c))
	s.answer(c, http.StatusOK, l, err)
}

// supportRepairHost puts a host back in rotation after checking it over
// SSH (`kernodeck hosts repair`), audited as support's actions are.
func (s *Server) supportRepairHost(c *gin.Context) { s.supportHostAction(c, s.RepairHost) }

// supportRetireHost takes a host out of rotation (`kernodeck hosts
// retire`), audited as support's actions are.
func (s *Server) supportRetireHost(c *gin.Context) { s.supportHostAction(c, s.RetireHost) }

func (s *Server) hostsRepair(ctx context.Context, name, note string) error {
	return s.hosts.Repair(ctx, name, note)
}

func (s *Server) hostsRetire(ctx context.Context, name, note string) error {
	return s.hosts.Retire(ctx, name, note)
}

// supportHostAction answers act on the host named in the path (no
// inventory: refused before the body is read).
func (s *Server) supportHostAction(c *gin.Context,
	act func(ctx context.Context, a *Agent, key, name string, in ActionInput) (ActionOutcome, error)) {
	if err := s.requireRole(agentOf(c), domain.RoleOperator); err != nil {
		s.fail(c, err) // before whether there is an inventory: not an operator's to know
		return
	}
	if s.hosts == nil {
		s.fail(c, errNoHostInventory)
		return
	}
	s.supportReasonOnly(c, act, c.Param("name"))
}

func hostListed(hosts []sshhost.Host, name string) bool {
	for _, h := range hosts {
		if h.Name == name {
			return true
		}
	}
	return false
}

// hostError gives the inventory's refusals their stable code and French
// message; anything else stays a failure.
func hostError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sshhost.ErrNoHost):
		return errHostNotFound
	case errors.Is(err, sshhost.ErrHostBusy):
		return errHostBusy
	case errors.Is(err, sshhost.ErrHostDirty):
		msg := "Réparation refusée : il reste sur l'hôte des traces d'un client précédent ; il reste hors rotation (voir sa note)."
		if errors.Is(err, sshhost.ErrRebootRequired) {
			msg = "Réparation refusée : seul un redémarrage de l'hôte peut le nettoyer ; redémarrez-le puis réparez-le à nouveau."
		}
		// What is left is the host's note: the detail, in French, after the sentinel.
		if _, left, ok := strings.Cut(err.Error(), sshhost.ErrHostDirty.Error()+": "); ok && left != "" {
			msg += " Reste : " + left + "."
		}
		return domain.Errorf(domain.ECodeHostDirty, "%s", msg)
	}
	return err
}
