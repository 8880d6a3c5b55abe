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
	if s.hosts == nil {
		s.fail(c, errNoHostInventory)
		return
	}
	ctx := c.Request.Context()
	hosts, err := s.hosts.List(ctx)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := supportHostList{Hosts: hosts, Actions: []domain.SupportAction{}}
	for _, h := range hosts {
		acts, err := s.store.ListSupportActions(ctx, hostTarget(h.Name))
		if err != nil {
			s.fail(c, err)
			return
		}
		out.Actions = append(out.Actions, acts...)
	}
	c.JSON(http.StatusOK, out)
}

// supportRepairHost puts a host back in rotation after checking it over
// SSH (`kernodeck hosts repair`), audited as support's actions are.
func (s *Server) supportRepairHost(c *gin.Context) {
	s.runHostAction(c, domain.ActionRepairHost, s.hostsRepair)
}

// supportRetireHost takes a host out of rotation (`kernodeck hosts
// retire`), audited as support's actions are.
func (s *Server) supportRetireHost(c *gin.Context) {
	s.runHostAction(c, domain.ActionRetireHost, s.hostsRetire)
}

func (s *Server) hostsRepair(ctx context.Context, name, note string) error {
	return s.hosts.Repair(ctx, name, note)
}

func (s *Server) hostsRetire(ctx context.Context, name, note string) error {
	return s.hosts.Retire(ctx, name, note)
}

// runHostAction records the action on the host named in the path, runs do
// with the reason as the host's note, and writes the outcome.
func (s *Server) runHostAction(c *gin.Context, action string, do func(ctx context.Context, name, note string) error) {
	if s.hosts == nil {
		s.fail(c, errNoHostInventory)
		return
	}
	reason, ok := s.decodeReason(c)
	if !ok {
		return
	}
	name := c.Param("name")
	hosts, err := s.hosts.List(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	if !hostListed(hosts, name) {
		s.fail(c, errHostNotFound)
		return
	}
	note := "par " + c.GetString(ctxAgent) + " : " + reason
	s.runSupportActionOn(c, hostTarget(name), action, reason, map[string]any{"host": name},
		func(ctx context.Context, _ int64, _ string) error {
			return hostError(do(ctx, name, note))
		})
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
