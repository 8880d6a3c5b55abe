package web

// Money actions awaiting a second agent in the support console,
// /support/approvals (issue 36, item 3): a money action above the
// four-eyes threshold is recorded by its service and waits; another agent
// approves it (ReviewAction then carries it out) or declines it, through
// a confirmation page like every action. The agent who asked sees it
// without the buttons: the service would refuse them (own_action).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

type consoleApprovalsData struct {
	Actions []approvalRow
	// FourEyes and DailyCap are the limits, in French.
	FourEyes, DailyCap string
	Form               consoleAction
	// Senior: the agent may review (the service refuses others).
	Senior bool
}

// approvalRow is an action awaiting review with what the page says of it.
type approvalRow struct {
	domain.SupportAction
	File  string // its file's console path
	Mine  bool   // asked by the agent viewing the page
	Money string
}

// reviewVerbs are the two reviews and their labels.
var reviewVerbs = map[string]string{"approve": "Approuver l'action", "decline": "Refuser l'action"}

func (s *Site) consoleApprovals(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	s.showApprovals(c, a, consoleAction{}, nil)
}

// showApprovals renders the list, with err (a refused review) and the
// form as typed.
func (s *Site) showApprovals(c *gin.Context, a *agent, form consoleAction, err error) {
	l, lerr := s.svc.AwaitingApproval(c.Request.Context(), a)
	if lerr != nil {
		s.consoleFail(c, a, lerr)
		return
	}
	d := consoleApprovalsData{FourEyes: usd(l.FourEyesCents), DailyCap: usd(l.AgentDailyCapCents), Form: form,
		Senior: a.Holds(domain.RoleSenior)}
	for _, act := range l.Actions {
		d.Actions = append(d.Actions, approvalRow{SupportAction: act, File: actionFile(act.TargetRef),
			Mine: act.Agent == l.Agent, Money: usd(act.MoneyCents)})
	}
	p := agentPage(a, "Actions à approuver")
	status := http.StatusOK
	if err != nil {
		p.Error, status = refusal(err, false), statusOf(err)
	}
	if id, perr := strconv.ParseInt(c.Query("action"), 10, 64); perr == nil && err == nil {
		p.Notice = replayed(c) + fmt.Sprintf("Action n° %d revue.", id)
	}
	p.Data = d
	s.render(c, status, "support_approvals", p)
}

// actionFile is the console path of an action's target.
func actionFile(ref string) string {
	if strings.HasPrefix(ref, domain.TopUpRefPrefix+"-") {
		return caseURL(domain.TargetTopUp, ref)
	}
	return caseURL(domain.TargetOrder, ref)
}

// readReview reads an approval or refusal form: the action's ID is the
// route's, the verb and reason the form's.
func readReview(c *gin.Context) (consoleAction, error) {
	act := consoleAction{Kind: "approval", Ref: c.Param("id"), Action: c.PostForm("action"),
		Reason: strings.TrimSpace(c.PostForm("reason"))}
	if id, err := strconv.ParseInt(act.Ref, 10, 64); err != nil || id <= 0 {
		return act, domain.Errorf(domain.ECodeNotFound, "Action de support introuvable.")
	}
	if _, ok := reviewVerbs[act.Action]; !ok {
		return act, domain.Errorf(domain.ECodeInvalid, "Action inconnue.")
	}
	return act, api.CheckReviewReason(act.Reason)
}

// consoleReviewConfirm says what an approval or a refusal does; nothing
// is sent before the agent confirms.
func (s *Site) consoleReviewConfirm(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	act, err := readReview(c)
	if err == nil && !a.Holds(domain.RoleSenior) {
		// No confirmation of what ReviewAction would refuse (a form
		// forced past the hidden buttons).
		err = domain.ErrForbiddenRole(domain.RoleSenior)
	}
	if err != nil {
		s.showApprovals(c, a, act, err)
		return
	}
	key, err := actionKey(a, act)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	change := fmt.Sprintf("L'action n° %s est approuvée en votre nom puis exécutée aussitôt, comme l'agent qui l'a demandée l'a décrite ; "+
		"son montant compte dans votre plafond du jour.", act.Ref)
	if act.Action == "decline" {
		change = fmt.Sprintf("L'action n° %s est refusée et close : rien n'est exécuté.", act.Ref)
	}
	p := agentPage(a, "Confirmer : "+reviewVerbs[act.Action])
	p.Data = consoleConfirmData{Action: act, Label: reviewVerbs[act.Action], Changes: []string{change}, Subject: "Action n°",
		Back: "/support/approvals", Post: "/support/approvals/" + act.Ref + "/act", Key: key}
	s.render(c, http.StatusOK, "support_confirm", p)
}

// consoleReviewAct carries a confirmed review out (ReviewAction), then
// shows the list (its outcome) or the list with the refusal.
func (s *Site) consoleReviewAct(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	act, err := readReview(c)
	if err == nil {
		var id int64
		var replayed bool
		run := func(ctx context.Context, _ string) (api.ActionOutcome, error) {
			id, _ := strconv.ParseInt(act.Ref, 10, 64)
			return s.svc.ReviewAction(ctx, a, id, act.Action == "approve", act.Reason)
		}
		if id, replayed, err = s.postSupportAction(c, a, act, run); err == nil {
			c.Redirect(http.StatusSeeOther, "/support/approvals"+actionQuery(id, replayed))
			return
		}
	}
	var de *domain.Error
	if errors.As(err, &de) && de.Code == domain.ECodeUnauthorized {
		s.toConsoleLogin(c)
		return
	}
	s.showApprovals(c, a, act, err)
}
