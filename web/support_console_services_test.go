package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// fakeConsole answers the console's service calls: the browser with an
// agent cookie is agent "bob" (CSRF token "agent-tok"); an end-early is
// answered refusal.
type fakeConsole struct {
	fakeServices
	refusal  error
	endEarly []api.ActionInput
}

var fakeAgent = &api.Agent{Agent: "bob", Via: "session", CSRFToken: "agent-tok"}

func (f *fakeConsole) AgentSession(_ context.Context, r *http.Request) (*api.Agent, error) {
	if !hasAgentCookie(r) {
		return nil, nil
	}
	return fakeAgent, nil
}

func (f *fakeConsole) CheckAgentCSRF(a *api.Agent, token string) error {
	if a == nil || token != a.CSRFToken {
		return domain.Errorf(domain.ECodeForbidden, "jeton anti-CSRF refusé")
	}
	return nil
}

func (f *fakeConsole) SupportOrder(_ context.Context, _ *api.Agent, ref string) (api.SupportOrderDetail, error) {
	var d api.SupportOrderDetail
	d.Order.Ref, d.Order.Status = ref, domain.StatusActive
	d.AllowedActions = []string{domain.ActionEndEarly}
	return d, nil
}

func (f *fakeConsole) EndEarly(_ context.Context, a *api.Agent, key, ref string, in api.ActionInput) (api.ActionOutcome, error) {
	f.endEarly = append(f.endEarly, in)
	return api.ActionOutcome{}, f.refusal
}

// The console shows the refusal the support service gives, with its
// French message, with the refused action's form open; it calls the service only
// with the session's CSRF token and its confirmation page's key.
func TestConsoleShowsTheServiceRefusal(t *testing.T) {
	f := &fakeConsole{refusal: domain.FieldError("reason", "Raison refusée par le service.")}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	newTestSite(t).mount(r, f)
	act := consoleAction{Kind: domain.TargetOrder, Ref: "KD-1", Action: "end-early", Reason: "machine en panne"}
	key, err := actionKey(fakeAgent, act)
	if err != nil {
		t.Fatal(err)
	}
	post := func(csrf string) *httptest.ResponseRecorder {
		form := url.Values{"csrf": {csrf}, "key": {key}, "action": {"end-early"}, "reason": {"machine en panne"}}
		req := httptest.NewRequest(http.MethodPost, "/support/orders/KD-1/act", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: api.DevAgentCookie, Value: "session"})
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("forged"); rec.Code != http.StatusForbidden || len(f.endEarly) != 0 {
		t.Fatalf("forged CSRF token: %d, service called %d times", rec.Code, len(f.endEarly))
	}
	rec := post("agent-tok")
	body := rec.Body.String()
	if rec.Code != http.StatusBadRequest || !strings.Contains(body, "Action refusée : Raison refusée par le service.") ||
		!strings.Contains(body, `<details class="action" open>`) {
		t.Fatalf("refusal: %d %s", rec.Code, body)
	}
	if len(f.endEarly) != 1 || f.endEarly[0].Reason != "machine en panne" {
		t.Fatalf("service called with %+v", f.endEarly)
	}
}

// The console holds no copy of the reason's rule: a reason the support
// services would refuse is refused before the confirmation page with the
// service's French message, an action's and a decision's alike.
func TestConsoleReasonRuleIsTheServices(t *testing.T) {
	ch := newConsoleHarness(t)
	ref, _ := ch.lateOrder("reason@example.com")
	b := ch.browser()
	b.signIn(consoleToken)
	csrf := agentCSRF(t, b.get("/support/orders/"+ref))
	for path, want := range map[string]string{
		"/support/orders/" + ref + "/confirm": "Action refusée : Indiquez la raison de l&#39;action (3 à 2 000 caractères).",
		"/support/approvals/1/confirm":        "Action refusée : Indiquez la raison de votre décision (3 à 2 000 caractères).",
	} {
		action := "end-early"
		if strings.HasPrefix(path, "/support/approvals/") {
			action = "approve"
		}
		rec := b.do(http.MethodPost, path, url.Values{"csrf": {csrf}, "action": {action}, "reason": {" ab "}})
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
	}
	if n := ch.count(`SELECT count(*) FROM support_actions`); n != 0 || len(ch.wf.recorded()) != 0 {
		t.Fatalf("a refused reason acted: %d rows, calls %v", n, ch.wf.recorded())
	}
}
