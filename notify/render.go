// Package notify sends the customer emails queued in the transactional
// outbox (mail_outbox, written by package postgres in the same transaction
// as the state change): French templates with plain-text and HTML parts,
// delivered over SMTP by a dispatcher that runs in the worker process.
package notify

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

//go:embed templates/*.txt templates/*.html
var templateFS embed.FS

// subjects of each template; %s is the order or top-up reference.
var subjects = map[string]string{
	postgres.MailOrderCreated:     "Commande %s enregistrée",
	postgres.MailPaymentRequest:   "Demande de paiement pour %s",
	postgres.MailPaymentConfirmed: "Règlement confirmé pour la commande %s",
	postgres.MailMachineReady:     "Votre machine est prête (%s)",
	postgres.MailReminder:         "Rappel : fin de votre location %s, exportez vos résultats",
	postgres.MailRentalEnded:      "Location %s terminée",
	postgres.MailTopUpCredited:    "Recharge %s créditée",
	postgres.MailSupportAnswer:    "Réponse du support (%s)",
	postgres.MailExtensionPaid:    "Location %s prolongée",
	postgres.MailPayoutRequested:  "Retrait %s demandé",
	postgres.MailPayoutDone:       "Retrait %s confirmé",
	postgres.MailPayoutDeclined:   "Retrait %s refusé",
}

const htmlLayout = `<!doctype html><html lang="fr"><head><meta charset="utf-8"><title>{{.Subject}}</title></head>
<body style="font-family: sans-serif; line-height: 1.5; max-width: 640px">{{.Body}}
<hr><p style="color: #666; font-size: 12px">Kernodeck — ce message est envoyé automatiquement ; le suivi de votre compte fait foi.</p></body></html>`

const textFooter = "\n-- \nKernodeck — ce message est envoyé automatiquement ; le suivi de votre compte fait foi.\n"

// verificationSubject is the confirmation mail's subject (no reference).
const verificationSubject = "Confirmez votre adresse email Kernodeck"

// registrationAttempt is the template, and attemptSubject the subject, of
// the notice sent instead of a link when the address already has an account.
const (
	registrationAttempt = "registration_attempt"
	attemptSubject      = "Tentative d'inscription avec votre adresse email Kernodeck"
)

// VerifyPath is the site's page a confirmation link opens (package web
// serves it; the link's token is its "token" query parameter).
const VerifyPath = "/verify-email"

// Renderer renders the templates.
type Renderer struct {
	// BaseURL is the customer site; links go to {BaseURL}/orders/{ref} and
	// {BaseURL}/topups/{ref}.
	BaseURL string
	text    map[string]*texttemplate.Template
	html    map[string]*htmltemplate.Template
	layout  *htmltemplate.Template
}

// NewRenderer parses every template.
func NewRenderer(baseURL string) (*Renderer, error) {
	r := &Renderer{BaseURL: strings.TrimRight(baseURL, "/"),
		text: map[string]*texttemplate.Template{}, html: map[string]*htmltemplate.Template{}}
	var err error
	if r.layout, err = htmltemplate.New("layout").Parse(htmlLayout); err != nil {
		return nil, err
	}
	names := []string{postgres.MailEmailVerification, registrationAttempt}
	for name := range subjects {
		names = append(names, name)
	}
	for name := range accountSubjects {
		names = append(names, name)
	}
	for _, name := range names {
		raw, err := templateFS.ReadFile("templates/" + name + ".txt")
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		if r.text[name], err = texttemplate.New(name).Option("missingkey=error").Parse(string(raw)); err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		raw, err = templateFS.ReadFile("templates/" + name + ".html")
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		if r.html[name], err = htmltemplate.New(name).Option("missingkey=error").Parse(string(raw)); err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
	}
	return r, nil
}

// Mail is a rendered message.
type Mail struct {
	Subject string
	Text    string
	HTML    string
}

// payment is what a payment request shows.
type payment struct {
	Asset, Network, Address, Amount, Deadline, USD string
}

// view is the data every template sees.
type view struct {
	FirstName    string
	Ref          string
	What         string // "la commande" / "la recharge"
	URL          string
	GPU          string
	Lots         string // "1 lot", "2 lots"
	TotalGPUs    int
	DurationDays string // "3 jours"
	Total        string
	Amount       string
	PeriodStart  string
	PeriodEnd    string
	Pay          payment
	Answer       string
	// Added is what an extension added ("7 jours").
	Added string
}

// frDate renders a time the way the tracking does.
func frDate(t time.Time) string { return domain.FrenchDate(t) }

func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case float64:
			return fmt.Sprint(v)
		}
	}
	return ""
}

func dateField(m map[string]any, keys ...string) string {
	s := str(m, keys...)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return frDate(t)
	}
	return s
}

// verificationView is what the confirmation mail shows.
type verificationView struct {
	FirstName string
	URL       string
	Expires   string
}

// RenderVerification renders the confirmation mail: the link to the site's
// confirmation page with token, and when it stops working.
func (r *Renderer) RenderVerification(firstName, token string, expires time.Time) (Mail, error) {
	v := verificationView{FirstName: firstName, Expires: frDate(expires),
		URL: r.BaseURL + VerifyPath + "?token=" + url.QueryEscape(token)}
	return r.execute(postgres.MailEmailVerification, verificationSubject, v)
}

// RenderRegistrationAttempt renders the notice to an address's owner that
// someone tried to register an account with it.
func (r *Renderer) RenderRegistrationAttempt(firstName string) (Mail, error) {
	return r.execute(registrationAttempt, attemptSubject, verificationView{FirstName: firstName, URL: r.BaseURL + "/login"})
}

// Render renders template name for a customer.
func (r *Renderer) Render(name, firstName, ref string, d postgres.MailData) (Mail, error) {
	if m, ok, err := r.renderAccount(name, firstName); ok {
		return m, err
	}
	subject, ok := subjects[name]
	if !ok {
		return Mail{}, fmt.Errorf("unknown mail template %q", name)
	}
	v := view{FirstName: firstName, Ref: ref, What: "la commande", URL: r.BaseURL + "/orders/" + ref,
		GPU: domain.GPUNames{d.GPUModel: d.GPUName}.Name(d.GPUModel), Lots: domain.Plural(d.Lots, "lot", "lots"), TotalGPUs: d.TotalGPUs,
		DurationDays: domain.Plural(d.DurationDays, "jour", "jours"), Total: domain.FrenchUSD(d.TotalCents), Amount: domain.FrenchUSD(d.AmountCents)}
	switch {
	case strings.HasPrefix(ref, domain.TopUpRefPrefix+"-"):
		v.What, v.URL = "la recharge", r.BaseURL+"/topups/"+ref
	case strings.HasPrefix(ref, domain.PayoutRefPrefix+"-"):
		v.What, v.URL = "le retrait", r.BaseURL+"/compte/retraits/"+ref
	}
	if d.PeriodStart != nil {
		v.PeriodStart = frDate(*d.PeriodStart)
	}
	if d.PeriodEnd != nil {
		v.PeriodEnd = frDate(*d.PeriodEnd)
	}
	if v.PeriodEnd == "" { // reminders carry the end they announce
		v.PeriodEnd = dateField(d.Event, "period_end")
	}
	ev := d.Event
	v.Pay = payment{
		Asset: str(ev, "asset"), Network: str(ev, "network"), Address: str(ev, "address"),
		Amount: str(ev, "amount", "amount_display", "amount_base"), Deadline: dateField(ev, "deadline", "expires_at"),
	}
	for _, k := range []string{"usd_cents", "amount_cents"} {
		if c, ok := ev[k].(float64); ok && c > 0 {
			v.Pay.USD = domain.FrenchUSD(int64(c))
			break
		}
	}
	if d, ok := ev["days"].(float64); ok && d > 0 {
		v.Added = domain.Plural(int(d), "jour", "jours")
	}
	v.Answer = str(ev, "answer", "message")
	if v.Answer == "" {
		v.Answer = domain.CustomerText(d.Message, domain.GPUNames{d.GPUModel: d.GPUName})
	}
	if name == postgres.MailPaymentRequest && (v.Pay.Address == "" || v.Pay.Amount == "" || v.Pay.Asset == "") {
		return Mail{}, fmt.Errorf("payment request for %s lacks asset, amount or address", ref)
	}
	return r.execute(name, fmt.Sprintf(subject, ref), v)
}

// execute renders the text and HTML parts of template name with v.
func (r *Renderer) execute(name, subject string, v any) (Mail, error) {
	var text, body bytes.Buffer
	if err := r.text[name].Execute(&text, v); err != nil {
		return Mail{}, fmt.Errorf("render %s: %w", name, err)
	}
	if err := r.html[name].Execute(&body, v); err != nil {
		return Mail{}, fmt.Errorf("render %s: %w", name, err)
	}
	m := Mail{Subject: subject, Text: text.String() + textFooter}
	var page bytes.Buffer
	if err := r.layout.Execute(&page, map[string]any{"Subject": m.Subject, "Body": htmltemplate.HTML(body.String())}); err != nil {
		return Mail{}, fmt.Errorf("render %s: %w", name, err)
	}
	m.HTML = page.String()
	return m, nil
}
