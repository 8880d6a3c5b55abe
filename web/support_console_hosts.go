package web

// The operators' view of the GPU hosts in the support console: the SSH
// driver's inventory (the SupportHosts service), and repair and retire as
// audited actions through their services (those of POST
// /v1/support/hosts/{name}/...), which run the code of `kernodeck hosts
// repair/retire`.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/provision/sshhost"
)

// hostActions are the console's actions on a host: label, service and
// what the confirmation page says will change.
var hostActions = map[string]struct {
	Label  string
	Run    func(sv supportActions) refAction
	Change func(h sshhost.Host) []string
}{
	"repair": {Label: "Remettre l'hôte en service", Run: func(sv supportActions) refAction { return sv.RepairHost }, Change: func(h sshhost.Host) []string {
		return []string{
			fmt.Sprintf("L'hôte %s (%d × %s, %s aujourd'hui) est vérifié à nouveau sur la machine, par SSH : effacement et contrôle de chaque compte client passé non encore trouvé propre.", h.Name, h.GPUCount, h.GPUModel, label(stateLabels, h.State)),
			"S'il ne reste rien d'un client précédent, il revient en rotation (disponible) et votre raison devient sa note.",
			"Sinon la réparation est refusée : l'hôte reste en panne et sa note dit ce qui reste.",
		}
	}},
	"retire": {Label: "Retirer l'hôte de la rotation", Run: func(sv supportActions) refAction { return sv.RetireHost }, Change: func(h sshhost.Host) []string {
		out := []string{fmt.Sprintf("L'hôte %s (%d × %s, %s aujourd'hui) sort de la rotation : aucune nouvelle commande ne l'obtient, jusqu'à sa réparation.", h.Name, h.GPUCount, h.GPUModel, label(stateLabels, h.State)),
			"Votre raison devient sa note."}
		if h.OrderRef != nil {
			out = append(out, fmt.Sprintf("La commande %s qui l'occupe le garde jusqu'à la fin de sa location.", *h.OrderRef))
		}
		return out
	}},
}

type consoleHostsData struct {
	Hosts   []sshhost.Host
	Actions []domain.SupportAction
	// Unavailable is why there is no inventory (machine driver not SSH's).
	Unavailable string
	// Form is what the agent typed in a refused action, shown again.
	Form consoleAction
}

// consoleHosts is the inventory: each host's state and why, the order
// holding it, the last release check, and the operators' actions.
func (s *Site) consoleHosts(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	s.showHosts(c, a, consoleAction{}, nil)
}

// showHosts renders the inventory, with refusal's message if not nil.
func (s *Site) showHosts(c *gin.Context, a *agent, form consoleAction, refusal error) {
	l, err := s.svc.SupportHosts(c.Request.Context(), a)
	var d consoleHostsData
	switch {
	case domain.ErrorCode(err) == domain.ECodeNoHostInventory:
		d.Unavailable = domain.ErrorMessage(err)
	case err != nil:
		s.consoleFail(c, a, err)
		return
	default:
		d.Hosts, d.Actions = l.Hosts, l.Actions
	}
	d.Form = form
	p := agentPage(a, "Hôtes GPU")
	status := http.StatusOK
	if refusal != nil {
		p.Error, status = "Action refusée : "+domain.ErrorMessage(refusal), statusOf(refusal)
	}
	if id, err := strconv.ParseInt(c.Query("action"), 10, 64); err == nil {
		for _, act := range d.Actions {
			if act.ID == id {
				p.Notice = replayed(c) + fmt.Sprintf("Action n° %d (%s, %s) : %s.", act.ID, actionName(act),
					strings.TrimPrefix(act.TargetRef, domain.HostTargetPrefix), outcomeLabel(act.Outcome))
			}
		}
	}
	p.Data = d
	s.render(c, status, "support_hosts", p)
}

// readHostAction reads the repair or retire form posted for a host.
func readHostAction(c *gin.Context) (consoleAction, error) {
	act := consoleAction{Kind: "host", Ref: c.Param("name"), Action: c.PostForm("action"),
		Reason: strings.TrimSpace(c.PostForm("reason"))}
	if _, ok := hostActions[act.Action]; !ok {
		return act, domain.Errorf(domain.ECodeInvalid, "Action inconnue.")
	}
	return act, api.CheckReason(act.Reason)
}

func hostURL(name string) string { return "/support/hosts/" + url.PathEscape(name) }

// consoleHostConfirm says what a repair or a retire will change; nothing
// is carried out before the agent confirms.
func (s *Site) consoleHostConfirm(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	act, err := readHostAction(c)
	if err != nil {
		s.showHosts(c, a, act, err)
		return
	}
	l, err := s.svc.SupportHosts(c.Request.Context(), a)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	var host *sshhost.Host
	for i := range l.Hosts {
		if l.Hosts[i].Name == act.Ref {
			host = &l.Hosts[i]
		}
	}
	if host == nil {
		s.consoleFail(c, a, domain.Errorf(domain.ECodeNotFound, "Hôte introuvable."))
		return
	}
	key, err := actionKey(a, act)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	spec := hostActions[act.Action]
	p := agentPage(a, "Confirmer : "+spec.Label)
	p.Data = consoleConfirmData{Action: act, Label: spec.Label, Changes: spec.Change(s.namedHost(*host)), Subject: "Hôte",
		Back: "/support/hosts#hote-" + act.Ref, Post: hostURL(act.Ref) + "/act", Key: key}
	s.render(c, http.StatusOK, "support_confirm", p)
}

// consoleHostAct carries a confirmed repair or retire out through its
// service (audit row, then the inventory's code), then shows the inventory.
func (s *Site) consoleHostAct(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	act, err := readHostAction(c)
	if err == nil {
		var id int64
		var replayed bool
		run := func(ctx context.Context, key string) (api.ActionOutcome, error) {
			return hostActions[act.Action].Run(s.svc)(ctx, a, key, act.Ref, api.ActionInput{Reason: act.Reason})
		}
		if id, replayed, err = s.postSupportAction(c, a, act, run); err == nil {
			c.Redirect(http.StatusSeeOther, "/support/hosts"+actionQuery(id, replayed)+"#hote-"+url.PathEscape(act.Ref))
			return
		}
	}
	if domain.ErrorCode(err) == domain.ECodeUnauthorized {
		s.toConsoleLogin(c)
		return
	}
	s.showHosts(c, a, act, err)
}
