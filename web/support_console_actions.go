package web

// The support console's actions: a form on a file, a confirmation page
// saying what will change, then the support service the /v1/support
// endpoint calls (audit row in support_actions first, then the workflow).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// consoleAction is an action an agent asks for on a file: read from the
// form, described on the confirmation page, then sent to the API.
type consoleAction struct {
	Kind        string // the file's: domain.TargetOrder or domain.TargetTopUp
	Ref         string
	Action      string // see actionSpecs
	ExceptionID int64
	Reason      string
	AmountCents int64
	Amount      string // as typed
	Days        int
	// ReturnedOnChain (value-exception): sent back on chain, no value.
	ReturnedOnChain bool
}

// actionSpec is one action the console offers: where it applies, its
// label, and the support service that carries it out.
type actionSpec struct {
	Label     string
	Kinds     []string
	Exception bool // on a queued amount of the file (exception_id)
	// Workflow is the support action (domain.Action*) the case's workflow
	// must allow in its status for the console to offer it (the API's
	// allowed_actions, from the phase table); "" when the status does not
	// decide (support's queue, a host's flag).
	Workflow string
	// run carries act out through its support service.
	run func(ctx context.Context, sv supportActions, a *agent, key string, act consoleAction) (api.ActionOutcome, error)
}

// onRef runs a service acting on the file's ref.
func onRef(f func(sv supportActions) refAction) func(context.Context, supportActions, *agent, string, consoleAction) (api.ActionOutcome, error) {
	return func(ctx context.Context, sv supportActions, a *agent, key string, act consoleAction) (api.ActionOutcome, error) {
		return f(sv)(ctx, a, key, act.Ref, act.input())
	}
}

// onKindRef runs a service acting on the file's kind and ref.
func onKindRef(f func(sv supportActions) kindRefAction) func(context.Context, supportActions, *agent, string, consoleAction) (api.ActionOutcome, error) {
	return func(ctx context.Context, sv supportActions, a *agent, key string, act consoleAction) (api.ActionOutcome, error) {
		return f(sv)(ctx, a, key, act.Kind, act.Ref, act.input())
	}
}

// onException runs a service acting on the form's queued amount.
func onException(f func(sv supportActions) exceptionAction) func(context.Context, supportActions, *agent, string, consoleAction) (api.ActionOutcome, error) {
	return func(ctx context.Context, sv supportActions, a *agent, key string, act consoleAction) (api.ActionOutcome, error) {
		return f(sv)(ctx, a, key, act.ExceptionID, act.input())
	}
}

var actionSpecs = map[string]actionSpec{
	"attribute-payment": {Label: "Attribuer un paiement", Kinds: []string{domain.TargetOrder, domain.TargetTopUp}, Workflow: domain.ActionAttributePayment,
		run: onKindRef(func(sv supportActions) kindRefAction { return sv.AttributePayment })},
	"extend": {Label: "Prolonger la location", Kinds: []string{domain.TargetOrder}, Workflow: domain.ActionExtend,
		run: onRef(func(sv supportActions) refAction { return sv.Extend })},
	"end-early": {Label: "Terminer la location maintenant", Kinds: []string{domain.TargetOrder}, Workflow: domain.ActionEndEarly,
		run: onRef(func(sv supportActions) refAction { return sv.EndEarly })},
	"retry-provisioning": {Label: "Relancer la préparation", Kinds: []string{domain.TargetOrder}, Workflow: domain.ActionRetryProvisioning,
		run: onRef(func(sv supportActions) refAction { return sv.RetryProvisioning })},
	"close-host-flag": {Label: "Clore le signalement de machine salie", Kinds: []string{domain.TargetOrder},
		run: onRef(func(sv supportActions) refAction { return sv.CloseHostFlag })},
	"cancel": {Label: "Annuler", Kinds: []string{domain.TargetOrder, domain.TargetTopUp}, Workflow: domain.ActionCancel,
		run: onKindRef(func(sv supportActions) kindRefAction { return sv.SupportCancel })},
	"refund": {Label: "Rembourser au solde", Kinds: []string{domain.TargetOrder}, Workflow: domain.ActionRefund,
		run: onRef(func(sv supportActions) refAction { return sv.Refund })},
	"refund-exception": {Label: "Rembourser le montant en attente au solde", Kinds: []string{domain.TargetOrder, domain.TargetTopUp}, Exception: true,
		run: onException(func(sv supportActions) exceptionAction { return sv.RefundException })},
	"count-exception": {Label: "Compter le montant en attente", Kinds: []string{domain.TargetOrder, domain.TargetTopUp}, Exception: true, Workflow: domain.ActionAttributePayment,
		run: onException(func(sv supportActions) exceptionAction { return sv.CountException })},
	"resolve-exception": {Label: "Clore le signalement", Kinds: []string{domain.TargetOrder, domain.TargetTopUp}, Exception: true,
		run: onException(func(sv supportActions) exceptionAction { return sv.ResolveException })},
	"value-exception": {Label: "Indiquer la valeur de l'autre actif", Kinds: []string{domain.TargetOrder, domain.TargetTopUp}, Exception: true,
		run: onException(func(sv supportActions) exceptionAction { return sv.ValueException })},
}

// input is what the service of a reads: the reason, and the parameters of
// the actions taking some.
func (a consoleAction) input() api.ActionInput {
	in := api.ActionInput{Reason: a.Reason}
	switch a.Action {
	case "extend":
		in.Days = a.Days
	case "attribute-payment", "refund", "refund-exception", "count-exception":
		in.AmountCents = a.AmountCents
	case "value-exception":
		in.ReturnedOnChain = a.ReturnedOnChain
		if !a.ReturnedOnChain {
			in.AmountCents = a.AmountCents
		}
	}
	return in
}

// readAction reads the action form posted on a file (kind from the route).
func readAction(c *gin.Context) (consoleAction, error) {
	a := consoleAction{Kind: domain.TargetOrder, Ref: c.Param("ref"), Action: c.PostForm("action"),
		Reason: strings.TrimSpace(c.PostForm("reason")), Amount: strings.TrimSpace(c.PostForm("amount"))}
	if strings.HasPrefix(c.FullPath(), "/support/topups/") {
		a.Kind = domain.TargetTopUp
	}
	spec, ok := actionSpecs[a.Action]
	if !ok || !slices.Contains(spec.Kinds, a.Kind) {
		return a, domain.Errorf(domain.ECodeInvalid, "Action inconnue.")
	}
	if spec.Exception {
		id, err := strconv.ParseInt(c.PostForm("exception_id"), 10, 64)
		if err != nil || id <= 0 {
			return a, domain.Errorf(domain.ECodeInvalid, "Montant en attente introuvable.")
		}
		a.ExceptionID = id
	}
	if raw := c.PostForm("amount_cents"); raw != "" {
		// The confirmation page's hidden field: cents already.
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			return a, domain.FieldError("amount", "Montant invalide.")
		}
		a.AmountCents = n
	} else if a.Amount != "" {
		n, err := parseUSD(a.Amount)
		if err != nil {
			return a, domain.FieldError("amount", "Montant en USD invalide : écrivez par exemple 23,57.")
		}
		a.AmountCents = n
	}
	if a.Action == "refund" && a.AmountCents <= 0 {
		return a, domain.FieldError("amount", "Indiquez le montant à rembourser, en USD.")
	}
	if a.Action == "value-exception" {
		a.ReturnedOnChain = c.PostForm("returned_on_chain") == "1"
		switch {
		case a.ReturnedOnChain && a.AmountCents > 0:
			return a, domain.FieldError("amount", "Un montant renvoyé sur la chaîne n'a pas de valeur à indiquer.")
		case !a.ReturnedOnChain && a.AmountCents <= 0:
			return a, domain.FieldError("amount", "Indiquez la valeur en USD, ou cochez « renvoyé sur la chaîne ».")
		}
	}
	if a.Action == "extend" {
		n, err := strconv.Atoi(strings.TrimSpace(c.PostForm("days")))
		if err != nil || n < 1 {
			return a, domain.FieldError("days", "Indiquez un nombre de jours (1 ou plus).")
		}
		a.Days = n
	}
	return a, api.CheckReason(a.Reason)
}

// parseUSD reads "23,57", "23.57", "1 234,5" or "12" as cents.
func parseUSD(s string) (int64, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "USD"))
	s = strings.NewReplacer(" ", "", "\u202f", "", "\u00a0", "").Replace(s)
	s = strings.Replace(s, ",", ".", 1)
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || len(whole) > 12 || (hasFrac && (len(frac) == 0 || len(frac) > 2)) {
		return 0, errors.New("invalid amount")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 {
		return 0, errors.New("invalid amount")
	}
	var f int64
	if hasFrac {
		if len(frac) == 1 {
			frac += "0"
		}
		if f, err = strconv.ParseInt(frac, 10, 64); err != nil || f < 0 {
			return 0, errors.New("invalid amount")
		}
	}
	if w > (math.MaxInt64-f)/100 {
		return 0, errors.New("invalid amount")
	}
	return w*100 + f, nil
}

// consoleConfirmData is the confirmation page of an action.
type consoleConfirmData struct {
	Action consoleAction
	// Subject names what Action.Ref is ("Dossier" when empty).
	Subject string
	Label   string
	Changes []string
	Back    string
	Post    string
	// Key is the page's single-use key (support_console_keys.go).
	Key string
}

// consoleConfirm shows what an action will change, with a button that
// carries it out; nothing is carried out before that.
func (s *Site) consoleConfirm(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	act, err := readAction(c)
	d, ferr := s.loadFile(c.Request.Context(), a, act.Kind, act.Ref)
	if ferr != nil {
		s.consoleFail(c, a, ferr)
		return
	}
	if err == nil && !d.Offers[act.Action] {
		err = notOffered(act, d)
	}
	var changes []string
	if err == nil {
		changes, err = describe(act, d)
	}
	if err != nil {
		s.fileWithError(c, a, d, act, err, false)
		return
	}
	if cents := credit(act, d); cents > 0 {
		cust, err := s.svc.SupportCustomer(c.Request.Context(), a, d.Case.Customer.ID)
		if err != nil {
			s.consoleFail(c, a, err)
			return
		}
		changes = append(changes, fmt.Sprintf("Solde disponible du client : %s aujourd'hui, %s après l'action.",
			usd(cust.Balance.AvailableCents), usd(cust.Balance.AvailableCents+cents)))
	}
	key, err := actionKey(a, act)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	p := agentPage(a, "Confirmer : "+actionSpecs[act.Action].Label)
	base := caseURL(act.Kind, act.Ref)
	p.Data = consoleConfirmData{Action: act, Label: actionSpecs[act.Action].Label, Changes: changes, Back: base, Post: base + "/act", Key: key}
	s.render(c, http.StatusOK, "support_confirm", p)
}

// consoleAct carries a confirmed action out through its support service
// (audit row, then the workflow), then shows the file again.
func (s *Site) consoleAct(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	act, err := readAction(c)
	replayed := false
	if err == nil {
		var id int64
		run := func(ctx context.Context, key string) (api.ActionOutcome, error) {
			return actionSpecs[act.Action].run(ctx, s.svc, a, key, act)
		}
		if id, replayed, err = s.postSupportAction(c, a, act, run); err == nil {
			c.Redirect(http.StatusSeeOther, caseURL(act.Kind, act.Ref)+actionQuery(id, replayed))
			return
		}
	}
	if domain.ErrorCode(err) == domain.ECodeUnauthorized {
		s.toConsoleLogin(c)
		return
	}
	d, ferr := s.loadFile(c.Request.Context(), a, act.Kind, act.Ref)
	if ferr != nil {
		s.consoleFail(c, a, ferr)
		return
	}
	s.fileWithError(c, a, d, act, err, replayed)
}

// actionQuery is the query of the page showing action id's outcome
// (replayed: its confirmation was posted again).
func actionQuery(id int64, replayed bool) string {
	q := "?action=" + strconv.FormatInt(id, 10)
	if replayed {
		q += "&renvoi=1"
	}
	return q
}

// fileWithError shows the file with the refusal of an action (the
// service's French message) and the form as typed.
func (s *Site) fileWithError(c *gin.Context, a *agent, d consoleFileData, act consoleAction, err error, replayed bool) {
	p := agentPage(a, fileTitle(d.Kind, d.Ref))
	p.Error = refusal(err, replayed)
	d.Form = act
	p.Data = d
	s.renderConsole(c, statusOf(err), "support_file", p, fileLive(d))
}

// offers says which of the console's actions the file d offers: those of
// its kind whose workflow action its status allows (allowed, the API's
// allowed_actions), closing a host flag only when one is open.
func offers(d consoleFileData, allowed []string) map[string]bool {
	out := map[string]bool{}
	for name, spec := range actionSpecs {
		out[name] = slices.Contains(spec.Kinds, d.Kind) && (spec.Workflow == "" || slices.Contains(allowed, spec.Workflow))
	}
	out["close-host-flag"] = out["close-host-flag"] && len(d.OpenHostFlags) > 0 && d.operator
	return out
}

// notOffered refuses an action the file's status does not allow (a page
// left open while the order moved on).
func notOffered(act consoleAction, d consoleFileData) error {
	if act.Action == "close-host-flag" && !d.operator {
		return domain.ErrForbiddenRole(domain.RoleOperator)
	}
	what := "cette commande"
	if d.Kind == domain.TargetTopUp {
		what = "cette recharge"
	}
	return domain.Errorf(domain.ECodeConflict, "« %s » n'est pas possible sur %s au statut « %s » : son workflow la refuserait. "+
		"Seules les actions possibles sont proposées sur le dossier.", actionSpecs[act.Action].Label, what, label(statusLabels, d.Status))
}

// refusal says, in French, why an action was not done (replayed: its
// confirmation was posted again, and this is the first answer).
func refusal(err error, replayed bool) string {
	msg := domain.ErrorMessage(err)
	var de *domain.Error
	if errors.As(err, &de) {
		msg = "Action refusée : " + de.Message
	}
	if replayed {
		msg = replayNotice + msg
	}
	return msg
}
