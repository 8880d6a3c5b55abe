package web

// The support console, /support: the exception queue, search, an order's
// and a top-up's file, and support's actions as forms with a confirmation
// page. Agents sign in with their token (KERNODECK_SUPPORT_TOKENS),
// exchanged for a session of this browser (cookie __Host-kd_agent); every
// page calls package api's support services in Go (web/services_console.go)
// with that session's agent, as the customer pages call the customer's
// services. Reads come from the support read model (the same values as
// `kernodeck support show`), and actions run through the same services as
// the /v1/support endpoints (audit row in support_actions first, then the
// workflow): the console holds no rule of its own.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// agent is the signed-in support agent.
type agent = api.Agent

// queuePageSize is how many queued amounts one queue page lists.
const queuePageSize = 50

// SetExplorers sets the block explorer URL templates of the console's
// transaction links, per network: "{txid}" is replaced by the transaction
// id (path-escaped). A network without one gets no link (development:
// none). Call it before serving.
func (s *Site) SetExplorers(byNetwork map[string]string) {
	s.explorers = byNetwork
}

// explorerURL is the link to txid on network's explorer, or "".
func (s *Site) explorerURL(network, txid string) string {
	tmpl := s.explorers[network]
	if tmpl == "" || txid == "" {
		return ""
	}
	return strings.ReplaceAll(tmpl, "{txid}", url.PathEscape(txid))
}

func (s *Site) mountConsole(r *gin.Engine) {
	g := r.Group("/support", pageHeaders)
	g.GET("/login", s.consoleLoginForm)
	g.POST("/login", s.consoleLogin)
	g.POST("/logout", s.consoleLogout)
	g.GET("", s.consoleQueue)
	g.GET("/live", s.consoleQueue)
	g.GET("/orders/:ref/live", s.consoleOrder)
	g.GET("/topups/:ref/live", s.consoleTopUp)
	g.GET("/find", s.consoleFind)
	g.GET("/list", s.consoleList)
	g.GET("/list.csv", s.consoleListCSV)
	g.GET("/orders/:ref", s.consoleOrder)
	g.GET("/topups/:ref", s.consoleTopUp)
	g.GET("/customers/:id", s.consoleCustomer)
	g.POST("/orders/:ref/confirm", s.consoleConfirm)
	g.POST("/orders/:ref/act", s.consoleAct)
	g.POST("/topups/:ref/confirm", s.consoleConfirm)
	g.POST("/topups/:ref/act", s.consoleAct)
	g.POST("/support-requests/:id/answer", s.consoleAnswer)
	g.GET("/hosts", s.consoleHosts)
	g.GET("/machine-queue", s.consoleMachineQueue)
	g.GET("/machine-queue/live", s.consoleMachineQueue)
	g.GET("/approvals", s.consoleApprovals)
	g.POST("/approvals/:id/confirm", s.consoleReviewConfirm)
	g.POST("/approvals/:id/act", s.consoleReviewAct)
	g.POST("/hosts/:name/confirm", s.consoleHostConfirm)
	g.POST("/hosts/:name/act", s.consoleHostAct)
	s.mountConsolePayouts(g)
}

func (s *Site) consoleFuncs() template.FuncMap {
	return template.FuncMap{
		"batchStatus":     func(st string) string { return label(batchStatusLabels, st) },
		"explorer":        s.explorerURL,
		"exceptionReason": func(r string) string { return label(exceptionReasons, r) },
		"actionLabel":     func(a string) string { return label(actionLabels, a) },
		"actionName":      actionName,
		"matched":         func(m string) string { return label(matchedLabels, m) },
		"gpu":             s.gpuName,
		"stateLabel":      func(st string) string { return label(stateLabels, st) },
		"outcome":         outcomeLabel,
		"actionResult":    actionResult,
		"resolution":      func(r string) string { return label(resolutionLabels, r) },
		"hostOf":          func(target string) string { return strings.TrimPrefix(target, domain.HostTargetPrefix) },
		"roleNames":       roleNames,
		"rowURL":          rowURL,
		"caseStatus":      caseStatus,
		"derefStr": func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		},
	}
}

// reasonCount is one filter of the queue.
type reasonCount struct {
	Reason string
	Count  int
	URL    string
	Active bool
}

type consoleQueueData struct {
	Exceptions []api.ExceptionView
	// Open is every queued amount, Shown after the filter; Counts per reason.
	Open, Shown  int
	Counts       []reasonCount
	Reason       string
	AllURL       string
	Page, Pages  int
	Prev, Next   string
	RemainingSum int64
	Requests     []domain.SupportRequest
	// Stuck are the orders whose provisioning failed.
	Stuck []domain.StuckOrder
	// Teardowns are the rentals whose teardown is stuck.
	Teardowns []teardownRow
	// HostFlags are the hosts their customer made dirty on purpose
	// (Operator: the agent works the hosts and sees them).
	HostFlags []domain.HostFlag
	Operator  bool
}

// consoleQueue is the exception queue (oldest first), with the support
// requests not answered yet.
func (s *Site) consoleQueue(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	exceptions, err := s.svc.SupportExceptions(ctx, a)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	reqs, err := s.svc.OpenSupportRequests(ctx, a)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	stuck, err := s.svc.ProvisioningFailures(ctx, a)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	var flags []domain.HostFlag
	if a.Holds(domain.RoleOperator) { // an operator's (the service refuses others)
		if flags, err = s.svc.HostFlags(ctx, a); err != nil {
			s.consoleFail(c, a, err)
			return
		}
	}
	teardowns, err := s.stuckTeardowns(ctx, a)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	d := consoleQueueData{Open: len(exceptions), Reason: c.Query("motif"), Requests: reqs, AllURL: "/support",
		Stuck: stuck, Teardowns: teardowns, HostFlags: flags, Operator: a.Holds(domain.RoleOperator)}
	counts := map[string]int{}
	var shown []api.ExceptionView
	for _, e := range exceptions {
		counts[e.Reason]++
		if d.Reason == "" || e.Reason == d.Reason {
			shown = append(shown, e)
			d.RemainingSum += e.RemainingCents
		}
	}
	for _, r := range exceptionReasonOrder {
		if counts[r] > 0 || r == d.Reason {
			d.Counts = append(d.Counts, reasonCount{Reason: r, Count: counts[r], URL: "/support?motif=" + url.QueryEscape(r), Active: r == d.Reason})
		}
	}
	d.Shown = len(shown)
	d.Pages = max(1, (len(shown)+queuePageSize-1)/queuePageSize)
	d.Page = 1
	if n, err := strconv.Atoi(c.Query("page")); err == nil && n >= 1 {
		d.Page = min(n, d.Pages)
	}
	from := (d.Page - 1) * queuePageSize
	d.Exceptions = shown[from:min(from+queuePageSize, len(shown))]
	pageURL := func(n int) string {
		v := url.Values{}
		if d.Reason != "" {
			v.Set("motif", d.Reason)
		}
		v.Set("page", strconv.Itoa(n))
		return "/support?" + v.Encode()
	}
	if d.Page > 1 {
		d.Prev = pageURL(d.Page - 1)
	}
	if d.Page < d.Pages {
		d.Next = pageURL(d.Page + 1)
	}
	p := agentPage(a, "File d'attente du support")
	p.Data = d
	live := "/support/live"
	if q := c.Request.URL.Query(); len(q) > 0 {
		q.Del("v")
		live += "?" + q.Encode()
	}
	s.renderConsole(c, http.StatusOK, "support_queue", p, queueLive(live))
}

type consoleFindData struct {
	Query   string
	Results []domain.FoundCase
	Done    bool
}

// consoleFind finds orders and top-ups by reference, email, txid or
// address (`kernodeck support find`).
func (s *Site) consoleFind(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	d := consoleFindData{Query: strings.TrimSpace(c.Query("q"))}
	p := agentPage(a, "Rechercher")
	status := http.StatusOK
	if d.Query != "" {
		results, err := s.svc.FindCases(c.Request.Context(), a, d.Query)
		switch {
		case err == nil:
			d.Results, d.Done = results, true
			if len(results) == 1 && c.Query("aller") != "" {
				c.Redirect(http.StatusSeeOther, caseURL(results[0].Kind, results[0].Ref))
				return
			}
		case domain.ErrorCode(err) == domain.ECodeInvalid:
			p.fieldError(err)
			status = http.StatusBadRequest
		default:
			s.consoleFail(c, a, err)
			return
		}
	}
	p.Data = d
	s.render(c, status, "support_find", p)
}

// consoleFileData is an order's or a top-up's file.
type consoleFileData struct {
	Kind  string // domain.TargetOrder or domain.TargetTopUp
	Ref   string
	Order *api.SupportOrderDetail
	TopUp *api.SupportTopUpDetail
	Case  caseView
	// Provisioning are the timeline's provisioning entries.
	Provisioning []domain.TimelineEvent
	// Form is what the agent typed in a refused action, shown again.
	Form consoleAction
	// OpenHostFlags are the customer flags of the order's hosts support
	// has not closed (what the customer did to make a host dirty).
	OpenHostFlags []domain.HostReservation
	// Status is the order's or top-up's; Offers the console's actions
	// (actionSpecs' names) it offers in that status (offers), CaseActions
	// whether any of the file's own (not a queued amount's) is.
	Status      string
	Offers      map[string]bool
	CaseActions bool
	// operator: the agent works the hosts (closes their flags).
	operator bool
}

// caseView is what order and top-up files share.
type caseView struct {
	Customer       domain.Account
	Timeline       []domain.TimelineEvent
	PaymentIntents []api.IntentView
	SupportActions []domain.SupportAction
	Exceptions     []api.ExceptionView
}

// loadFile reads the file of kind ref.
func (s *Site) loadFile(ctx context.Context, a *agent, kind, ref string) (consoleFileData, error) {
	d := consoleFileData{Kind: kind, Ref: ref, operator: a.Holds(domain.RoleOperator)}
	if kind == domain.TargetTopUp {
		t, err := s.svc.SupportTopUp(ctx, a, ref)
		if err != nil {
			return d, err
		}
		d.TopUp = &t
		readableTimeline(t.Timeline, nil)
		d.Case = caseView{t.Customer, t.Timeline, t.PaymentIntents, t.SupportActions, t.Exceptions}
		d.Status = t.TopUp.Status
		d.setOffers(t.AllowedActions)
		return d, nil
	}
	o, err := s.svc.SupportOrder(ctx, a, ref)
	if err != nil {
		return d, err
	}
	if o.Order.ModelName == "" && o.Order.Model != "" {
		o.Order.ModelName = s.gpuName(o.Order.Model)
	}
	// The timeline as the customer's order page shows it: amounts, model,
	// dates, networks and plurals formatted.
	readableTimeline(o.Timeline, o.Order.GPUNames())
	d.Order = &o
	d.Case = caseView{o.Customer, o.Timeline, o.PaymentIntents, o.SupportActions, o.Exceptions}
	for _, h := range o.Hosts {
		if h.CustomerFlag != nil && h.FlagClosedAt == nil {
			d.OpenHostFlags = append(d.OpenHostFlags, h)
		}
	}
	d.Status = o.Order.Status
	d.setOffers(o.AllowedActions)
	for _, e := range o.Timeline {
		switch e.Kind {
		case domain.EventProvisioningStep, domain.EventProvisioningFailed, domain.EventProvisioningRetry,
			domain.EventAccessAvailable, domain.EventAccessRevoked, domain.EventTeardownStuck:
			d.Provisioning = append(d.Provisioning, e)
		}
	}
	return d, nil
}

// setOffers sets what the file offers, its workflow allowing allowed.
func (d *consoleFileData) setOffers(allowed []string) {
	d.Offers = offers(*d, allowed)
	d.CaseActions = false
	for name, ok := range d.Offers {
		d.CaseActions = d.CaseActions || (ok && !actionSpecs[name].Exception)
	}
}

func (s *Site) consoleOrder(c *gin.Context) { s.consoleFile(c, domain.TargetOrder) }

func (s *Site) consoleTopUp(c *gin.Context) { s.consoleFile(c, domain.TargetTopUp) }

func (s *Site) consoleFile(c *gin.Context, kind string) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	d, err := s.loadFile(c.Request.Context(), a, kind, c.Param("ref"))
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	p := agentPage(a, fileTitle(kind, d.Ref))
	if id, err := strconv.ParseInt(c.Query("action"), 10, 64); err == nil {
		for _, act := range d.Case.SupportActions {
			if act.ID == id {
				state := outcomeLabel(act.Outcome)
				if act.AwaitingApproval() {
					state = "inscrite, en attente de l'accord d'un second agent (page « À approuver ») ; rien n'est encore fait"
				}
				p.Notice = replayed(c) + fmt.Sprintf("Action n° %d (%s) : %s.", act.ID, actionName(act), state)
			}
		}
	}
	if c.Query("answered") != "" {
		p.Notice = "Réponse envoyée : elle s'affiche sur le suivi de la commande et part par email au client."
	}
	p.Data = d
	s.renderConsole(c, http.StatusOK, "support_file", p, fileLive(d))
}

func fileTitle(kind, ref string) string {
	if kind == domain.TargetTopUp {
		return "Recharge " + ref
	}
	return "Commande " + ref
}

// consoleCustomer is a customer's file: account, balance, orders, top-ups
// and the balance's movements.
func (s *Site) consoleCustomer(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		id = 0 // not found
	}
	d, err := s.svc.SupportCustomer(c.Request.Context(), a, id)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	p := agentPage(a, "Client "+d.Customer.Email)
	p.Data = d
	s.render(c, http.StatusOK, "support_customer", p)
}

// consoleAnswer answers a customer's support request from its order's
// file: the service shows it on the order's tracking (live) and mails it.
func (s *Site) consoleAnswer(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	ref := c.PostForm("ref")
	err := s.svc.CheckAgentCSRF(a, c.PostForm("csrf"))
	id, perr := strconv.ParseInt(c.Param("id"), 10, 64)
	if perr != nil {
		id = 0 // not found
	}
	if err == nil {
		_, err = s.svc.AnswerSupportRequest(c.Request.Context(), a, id, c.PostForm("message"))
	}
	if err == nil {
		c.Redirect(http.StatusSeeOther, caseURL(domain.TargetOrder, ref)+"?answered="+strconv.FormatInt(id, 10)+"#demandes")
		return
	}
	if domain.ErrorCode(err) == domain.ECodeUnauthorized {
		s.toConsoleLogin(c)
		return
	}
	d, ferr := s.loadFile(c.Request.Context(), a, domain.TargetOrder, ref)
	if ferr != nil {
		s.consoleFail(c, a, err)
		return
	}
	p := agentPage(a, fileTitle(d.Kind, d.Ref))
	p.Error = "Réponse non envoyée : " + domain.ErrorMessage(err)
	var de *domain.Error
	if errors.As(err, &de) {
		p.Error = "Réponse non envoyée : " + de.Message
	}
	p.Data = d
	s.renderConsole(c, statusOf(err), "support_file", p, fileLive(d))
}

// queueLive is the queue's live part at liveURL: fetched again when the
// support queue's event stream (GET /v1/support/events) says it changed.
func queueLive(liveURL string) liveRegion {
	return liveRegion{URL: liveURL, Stream: "/v1/support/events", Trigger: "sse:queue",
		Page: strings.Replace(liveURL, "/support/live", "/support", 1)}
}

// fileLive is a file's live part, fetched again on each event of the
// file's stream (as the customer's order page does with its own), which
// starts after the timeline entries the page shows.
func fileLive(d consoleFileData) liveRegion {
	base := caseURL(d.Kind, d.Ref)
	stream := "/v1/support" + strings.TrimPrefix(base, "/support") + "/events"
	if last := lastEventID(d.Case.Timeline); last > 0 {
		stream += "?after=" + strconv.FormatInt(last, 10)
	}
	trigger := "sse:order, sse:timeline"
	if d.Kind == domain.TargetTopUp {
		trigger = "sse:topup, sse:timeline"
	}
	return liveRegion{URL: base + "/live", Stream: stream, Trigger: trigger, Page: base}
}

// renderConsole renders a console page whose evidence is live (tmpl's
// <tmpl>_live template: no form in it, so nothing typed is lost when it
// changes; live says where it is fetched again and on which events). On its
// live address (a path ending in /live) it answers that part alone, or 204
// if the client has this version.
func (s *Site) renderConsole(c *gin.Context, status int, tmpl string, p page, live liveRegion) {
	var buf bytes.Buffer
	if err := s.pages[tmpl].ExecuteTemplate(&buf, tmpl+"_live", p); err != nil {
		s.consoleFail(c, p.Agent, fmt.Errorf("render %s: %w", tmpl, err))
		return
	}
	sum := sha256.Sum256(buf.Bytes())
	live.HTML, live.Version = template.HTML(buf.String()), hex.EncodeToString(sum[:8])
	p.Live = live
	if !strings.HasSuffix(c.Request.URL.Path, "/live") {
		s.render(c, status, tmpl, p)
		return
	}
	if c.Query("v") == live.Version {
		c.Status(http.StatusNoContent)
		return
	}
	s.render(c, http.StatusOK, "live", p)
}
