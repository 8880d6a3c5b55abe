package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// session is the signed-in customer, if any.
type session = api.Customer

// session reads who is signed in: nil (no error) when nobody is. A cookie
// that names no valid session any more is removed.
func (s *Site) session(c *gin.Context) (*session, error) {
	if !hasSessionCookie(c.Request) {
		return nil, nil
	}
	me, err := s.svc.CustomerSession(c.Request.Context(), c.Request)
	if err == nil && me == nil {
		s.svc.ClearSession(c)
	}
	return me, err
}

// hasSessionCookie: a session cookie under either name (the API reads the
// one its configuration names, and decides whether it is valid).
func hasSessionCookie(r *http.Request) bool {
	for _, name := range []string{api.SessionCookie, api.DevSessionCookie} {
		if _, err := r.Cookie(name); err == nil {
			return true
		}
	}
	return false
}

// signedIn returns the session, or sends the visitor to the login page
// (ok false: the response is written).
func (s *Site) signedIn(c *gin.Context) (*session, bool) {
	me, err := s.session(c)
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	if me == nil {
		s.toLogin(c)
		return nil, false
	}
	return me, true
}

// signedInPost is signedIn for a form that changes something: its CSRF
// token must be the session's.
func (s *Site) signedInPost(c *gin.Context) (*session, bool) {
	me, ok := s.signedIn(c)
	if !ok {
		return nil, false
	}
	if err := s.svc.CheckCSRF(me, c.PostForm("csrf")); err != nil {
		s.fail(c, err)
		return nil, false
	}
	return me, true
}

// pageFor starts a page for the visitor (signed in or not).
func pageFor(me *session, title string) page {
	p := page{Title: title}
	if me != nil {
		p.Me, p.CSRF = &me.Account, me.CSRFToken
	}
	return p
}

// configuratorData is the configurator's form and its summary.
type configuratorData struct {
	Catalog api.CatalogResponse
	Config  domain.Configuration
	Lots    []lotChoice
	Quote   *api.QuoteResponse
	// Item is the chosen model (for the lot's GPU count next to the field).
	Item *domain.CatalogItem
	// Models are the catalog's models priced for the chosen duration.
	Models []modelChoice
	// Confirming: the summary is on the order's confirmation (/order),
	// which has its own button: no "Commander" there.
	Confirming bool
}

// lotChoice is one option of the lots field: with one host per order, a
// count whose GPUs no host of the chosen model has is not offered.
type lotChoice struct {
	N    int
	Fits bool
}

// configuration reads a configuration from the query (or a form), with the
// configurator's defaults for what is missing.
func configuration(c *gin.Context, cat api.CatalogResponse) domain.Configuration {
	cfg := domain.Configuration{Model: c.Query("gpu_model"), Lots: 1, DurationDays: 7, Preset: "python"}
	if cfg.Model == "" && len(cat.Models) > 0 {
		cfg.Model = cat.Models[0].Model
	}
	if n, err := strconv.Atoi(c.Query("lots")); err == nil {
		cfg.Lots = n
	}
	if n, err := strconv.Atoi(c.Query("duration_days")); err == nil {
		cfg.DurationDays = n
	}
	if p := c.Query("preset"); p != "" {
		cfg.Preset = p
	}
	return cfg
}

// configure loads the catalog and prices the configuration in the query.
// A refused configuration is returned as err with the data still usable.
func (s *Site) configure(c *gin.Context) (configuratorData, error) {
	var d configuratorData
	ctx := c.Request.Context()
	var err error
	if d.Catalog, err = s.svc.Catalog(ctx); err != nil {
		return d, err
	}
	d.Config = configuration(c, d.Catalog)
	for i := range d.Catalog.Models {
		if d.Catalog.Models[i].Model == d.Config.Model {
			d.Item = &d.Catalog.Models[i]
		}
	}
	d.Models = modelChoices(d.Catalog, d.Config.DurationDays)
	q, err := s.svc.Quote(ctx, d.Config)
	if err == nil {
		if q.Availability != nil {
			q.Availability.Message = domain.CustomerText(q.Availability.Message, domain.NewGPUNames(d.Catalog.Models))
		}
		d.Quote = &q
	}
	d.Lots = lotChoices(d.Catalog, d.Quote)
	return d, err
}

// lotChoices lists the lots field's options; with the quote's host sizes
// (one host per order), a count no host of the model matches is marked.
func lotChoices(cat api.CatalogResponse, q *api.QuoteResponse) []lotChoice {
	var out []lotChoice
	for n := cat.MinLots; n <= cat.MaxLots; n++ {
		fits := true
		if q != nil && q.Availability != nil && len(q.Availability.HostSizes) > 0 {
			fits = slices.Contains(q.Availability.HostSizes, n*q.GPUsPerLot)
		}
		out = append(out, lotChoice{N: n, Fits: fits})
	}
	return out
}

func (s *Site) configurator(c *gin.Context) {
	me, err := s.session(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.configuratorPage(c, pageFor(me, "Louer un GPU"), "configurator")
}

// summary is the configurator's summary alone, for htmx.
func (s *Site) summary(c *gin.Context) { s.configuratorPage(c, page{}, "summary") }

// configuratorPage renders tmpl with the configuration in the query priced;
// a configuration the API refuses is shown with its message.
func (s *Site) configuratorPage(c *gin.Context, p page, tmpl string) {
	d, err := s.configure(c)
	if err != nil && d.Catalog.Models == nil {
		s.fail(c, err)
		return
	}
	if err != nil {
		p.fieldError(err)
	}
	p.Data = d
	s.render(c, http.StatusOK, tmpl, p)
}

// authForm is the register and login forms' data.
type authForm struct {
	Next      string
	FirstName string
	LastName  string
	Email     string
	MinLen    int
	MaxLen    int
}

func newAuthForm(next string) authForm {
	return authForm{Next: safeNext(next), MinLen: domain.MinPasswordLen, MaxLen: domain.MaxPasswordLen}
}

func (s *Site) registerForm(c *gin.Context) { s.authPage(c, "Créer un compte", "register") }

func (s *Site) register(c *gin.Context) {
	f := newAuthForm(c.PostForm("next"))
	f.FirstName, f.LastName, f.Email = c.PostForm("first_name"), c.PostForm("last_name"), c.PostForm("email")
	acc, err := s.svc.Register(c.Request.Context(), api.RegisterInput{FirstName: f.FirstName, LastName: f.LastName,
		Email: f.Email, Password: c.PostForm("password")}, customerClient(c))
	if err == nil {
		_, err = s.svc.OpenSession(c, acc)
	}
	if err != nil {
		p := page{Title: "Créer un compte", Path: f.Next, Data: f}
		p.fieldError(err)
		s.render(c, statusOf(err), "register", p)
		return
	}
	c.Redirect(http.StatusSeeOther, f.Next)
}

func (s *Site) loginForm(c *gin.Context) { s.authPage(c, "Se connecter", "login") }

// authPage shows the login or registration form, or sends a visitor who is
// already signed in straight to where they were going.
func (s *Site) authPage(c *gin.Context, title, tmpl string) {
	me, err := s.session(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	f := newAuthForm(c.Query("next"))
	if me != nil {
		c.Redirect(http.StatusSeeOther, f.Next)
		return
	}
	p := pageFor(me, title)
	p.Path, p.Data = f.Next, f
	s.render(c, http.StatusOK, tmpl, p)
}

func (s *Site) login(c *gin.Context) {
	f := newAuthForm(c.PostForm("next"))
	f.Email = c.PostForm("email")
	acc, err := s.svc.Login(c.Request.Context(), f.Email, c.PostForm("password"), customerClient(c))
	if tr, ok := err.(*api.TOTPRequired); ok { // the code step (account_totp.go)
		s.loginCodeStep(c, f.Next, tr, page{}, http.StatusOK)
		return
	}
	if err == nil {
		_, err = s.svc.OpenSession(c, acc)
	}
	if err != nil {
		p := page{Title: "Se connecter", Path: f.Next, Data: f}
		p.fieldError(err)
		s.render(c, statusOf(err), "login", p)
		return
	}
	c.Redirect(http.StatusSeeOther, f.Next)
}

func (s *Site) logout(c *gin.Context) {
	me, err := s.session(c)
	if err == nil && me != nil {
		if err = s.svc.CheckCSRF(me, c.PostForm("csrf")); err == nil {
			err = s.svc.Logout(c.Request.Context(), me)
		}
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.svc.ClearSession(c)
	c.Redirect(http.StatusSeeOther, "/")
}

// statusOf is the HTTP status of a page answering err (the API's own).
func statusOf(err error) int { return api.StatusFor(domain.ErrorCode(err)) }

// orderURL is the order's page.
func orderURL(ref string) string { return "/orders/" + url.PathEscape(ref) }

// configQuery carries a configuration from the configurator to the order page.
func configQuery(cfg domain.Configuration) string {
	v := url.Values{}
	v.Set("gpu_model", cfg.Model)
	v.Set("lots", strconv.Itoa(cfg.Lots))
	v.Set("duration_days", strconv.Itoa(cfg.DurationDays))
	v.Set("preset", cfg.Preset)
	return v.Encode()
}
