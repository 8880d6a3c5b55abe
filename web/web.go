// Package web is Kernodeck's customer web site, in French: configurator,
// account, orders with their live tracking and checkout, balance and
// top-ups, support requests.
//
// Pages are rendered on the server with html/template and work without
// JavaScript (forms post, then redirect). Two vendored files add what needs
// a script: htmx 2.0.11 with its SSE extension 2.2.4 (live tracking from the
// order's event stream, the configurator's summary) and site.js (copy
// buttons, deadline countdown). The Content-Security-Policy allows scripts
// and styles from the site only, none inline.
//
// The site is mounted on the API's Gin engine (api.Deps.Site), on the same
// origin as /v1, and calls package api's services in Go (services.go,
// services_console.go) with the customer or the agent acting: every rule,
// check and French error message stays in those services.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/memo"
)

//go:embed templates/*.html
var templateFS embed.FS

// contentSecurityPolicy: scripts, styles and images from the site only;
// nothing inline, no frames, forms post to the site only.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// Site is the web site. Build it with New and pass it as api.Deps.Site.
type Site struct {
	log    *slog.Logger
	pages  map[string]*template.Template
	assets *assets
	svc    services
	// explorers are the support console's block explorer URL templates
	// per network (SetExplorers).
	explorers map[string]string
	// gpus caches the catalog's model names (console_format.go).
	gpus gpuNames
	zip  pageZip
	// madePages are the tracked pages made lately (tracked.go).
	madePages *memo.Memo[madePage]
}

// New parses the templates and the static files.
func New(logger *slog.Logger) (*Site, error) {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Site{log: logger, madePages: memo.New[madePage](madePages)}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}
	a, err := loadAssets()
	if err != nil {
		return nil, err
	}
	s.assets = a
	return s, nil
}

func (s *Site) parseTemplates() error {
	funcs := s.funcs()
	maps.Copy(funcs, s.consoleFuncs())
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return fmt.Errorf("web templates: %w", err)
	}
	entries, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	s.pages = map[string]*template.Template{}
	for _, path := range entries {
		name := strings.TrimPrefix(path, "templates/")
		if name == "layout.html" || name == "partials.html" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, path)
		if err != nil {
			return fmt.Errorf("web template %s: %w", name, err)
		}
		s.pages[strings.TrimSuffix(name, ".html")] = t
	}
	return nil
}

// Mount adds the site's routes to r; its handlers call svc's services.
func (s *Site) Mount(r *gin.Engine, svc *api.Server) { s.mount(r, svc) }

func (s *Site) mount(r *gin.Engine, svc services) {
	s.svc = svc
	r.GET("/static/:file", s.assets.serve)

	// Posts from another site are refused by the API's Origin check, which
	// runs on the whole engine; forms signed in also carry the CSRF token.
	g := r.Group("", pageHeaders)
	g.GET("/", s.configurator)
	g.GET("/favicon.ico", s.assets.favicon)
	g.GET("/summary", s.summary)
	g.GET("/register", s.registerForm)
	g.POST("/register", s.register)
	g.GET("/login", s.loginForm)
	g.POST("/login", s.login)
	g.POST("/logout", s.logout)
	g.GET("/verify-email", s.verifyForm)
	g.POST("/verify-email", s.verifyEmail)
	g.POST("/verify-email/resend", s.resendVerification)

	g.GET("/order", s.orderConfirm)
	g.POST("/orders", s.createOrder)
	g.GET("/orders", s.orders)
	g.GET("/orders/:ref", s.orderPage)
	g.GET("/orders/:ref/live", s.orderLive)
	g.GET("/orders/:ref/cancel", s.cancelOrderForm)
	g.POST("/orders/:ref/cancel", s.cancelOrder)
	g.GET("/orders/:ref/take-back", s.takeBackForm)
	g.POST("/orders/:ref/take-back", s.takeBack)
	g.GET("/orders/:ref/extend", s.extendForm)
	g.POST("/orders/:ref/extend", s.extend)
	g.POST("/orders/:ref/payment-requests", s.createOrderIntent)
	g.POST("/orders/:ref/pay-from-balance", s.payFromBalance)
	g.POST("/orders/:ref/private-key", s.privateKey)
	g.POST("/orders/:ref/ssh-key", s.replaceKey)
	g.POST("/orders/:ref/ssh-key/reissue", s.reissueKey)
	g.GET("/orders/:ref/support", s.supportForm)
	g.POST("/orders/:ref/support", s.createSupportRequest)
	g.POST("/payment-requests/:id/claim", s.claim)

	g.GET("/balance", s.balance)
	g.POST("/topups", s.createTopUp)
	g.GET("/topups/:ref", s.topUpPage)
	g.GET("/topups/:ref/live", s.topUpLive)
	g.POST("/topups/:ref/payment-requests", s.createTopUpIntent)

	s.mountAccount(g) // the customer's account page, /compte (account.go)
	s.mountPayouts(g) // /compte/retraits (payouts.go)
	s.mountConsole(r) // the support console, /support (support_console.go)
}

// NotFound answers the site's 404 page.
func (s *Site) NotFound(c *gin.Context) {
	pageHeaders(c)
	s.notFound(c)
}

// pageHeaders: the CSP, a referrer policy, and no caching of any page (private pages must not
// come back from the cache after logout, nor through the back button).
func pageHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// "no-referrer" (the API's) makes browsers send "Origin: null" with form
	// posts, which the Origin check refuses; same-origin still sends
	// nothing to other sites.
	h.Set("Referrer-Policy", "same-origin")
	c.Next()
}

// page is what every template receives.
type page struct {
	Title string
	// Me is the signed-in customer (nil when signed out) and CSRF the
	// session's token, put in every form that changes something.
	Me   *domain.Account
	CSRF string
	// Agent is the support agent signed in to the console (its pages only).
	Agent *api.Agent
	// Path is the current path (login links come back to it).
	Path string
	// Error is a message for the whole form; FieldErrors per field name.
	Error       string
	FieldErrors map[string]string
	// Notice is an information message (e.g. after "J'ai payé").
	Notice string
	Data   any
	// Live is the part of the page that updates itself (see withLive).
	Live liveRegion
}

// liveRegion is a page's self-updating part: its HTML and version, and the
// address that answers it again (204 while the version is unchanged). The
// region's element stays (its content is swapped), so the requests htmx
// queues on it while one is in flight are never lost.
type liveRegion struct {
	HTML    template.HTML
	Version string
	URL     string
	Trigger string // htmx trigger; "" for no updates
	// Stream is the event stream whose events trigger it (sse-connect),
	// when the page's template does not name it itself; Page is the page
	// to load again without JavaScript.
	Stream, Page string
}

// withLive renders the box template of p's live part and sets p.Live.
// Its version is a hash of that HTML: the live endpoint answers 204 No
// Content while it is unchanged, so htmx leaves the page as it is (an event
// stream that reconnects, or a poll, changes nothing on screen).
func (s *Site) withLive(p *page, box, url, trigger string) (version string, err error) {
	var buf bytes.Buffer
	if err := s.pages["live"].ExecuteTemplate(&buf, box, *p); err != nil {
		return "", fmt.Errorf("render %s: %w", box, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	version = hex.EncodeToString(sum[:8])
	p.Live = liveRegion{HTML: template.HTML(buf.String()), Version: version, URL: url, Trigger: trigger}
	return version, nil
}

// fieldError files err's message under its field (or as the form's error).
func (p *page) fieldError(err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		p.Error = domain.ErrorMessage(err)
		return
	}
	if de.Field != "" {
		if p.FieldErrors == nil {
			p.FieldErrors = map[string]string{}
		}
		p.FieldErrors[de.Field] = de.Message
		return
	}
	p.Error = de.Message
}

// render executes a page template into a buffer (so a template error never
// sends half a page), then writes it, compressed when the client accepts it.
func (s *Site) render(c *gin.Context, status int, name string, p page) {
	s.prepare(c, &p)
	body, err := s.execute(name, p)
	if err != nil {
		s.log.Error("web: render", "template", name, "err", err)
		c.String(http.StatusInternalServerError, "Erreur interne.")
		return
	}
	s.zip.write(c, status, "text/html; charset=utf-8", body)
}

// prepare completes p with what every page takes from its request.
func (s *Site) prepare(c *gin.Context, p *page) {
	if p.Path == "" {
		p.Path = c.Request.URL.RequestURI()
	}
	// Refusals spell amounts "12.50 USD" and dates "03/12/2026 à 14:05
	// UTC" (some come from workflows): shown the French way.
	p.Error = domain.CustomerText(p.Error, nil)
	p.Notice = domain.CustomerText(p.Notice, nil)
	for k, v := range p.FieldErrors {
		p.FieldErrors[k] = domain.CustomerText(v, nil)
	}
}

// execute renders the page template name with p (prepared).
func (s *Site) execute(name string, p page) ([]byte, error) {
	t, ok := s.pages[name]
	if !ok {
		return nil, fmt.Errorf("web: no such template %q", name)
	}
	var buf bytes.Buffer
	root := "layout.html"
	if name == "live" || name == "summary" {
		root = name // fragments for htmx: no layout
	}
	if err := t.ExecuteTemplate(&buf, root, p); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// fail renders an error page for an API or internal error.
func (s *Site) fail(c *gin.Context, err error) {
	if s.clientGone(c, err) {
		return
	}
	switch domain.ErrorCode(err) {
	case domain.ECodeNotFound:
		s.notFound(c)
		return
	case domain.ECodeUnauthorized:
		s.toLogin(c)
		return
	case domain.ECodeInternal:
		s.log.Error("web: page failed", "path", c.Request.URL.Path, "err", err)
	}
	p := s.visitorPage(c, "Une erreur est survenue")
	p.Error = domain.ErrorMessage(err)
	s.render(c, statusOf(err), "error", p)
}

// clientGone: the request was cancelled by its client (the configurator
// replaces its summary request while the customer clicks on, a tab is
// closed): whatever failed, nobody reads the answer and nothing is wrong.
// Logged at debug level, answered with nothing.
func (s *Site) clientGone(c *gin.Context, err error) bool {
	if c.Request.Context().Err() == nil {
		return false
	}
	s.log.Debug("web: client went away", "path", c.Request.URL.Path, "err", err)
	c.Abort()
	return true
}

// notFound answers the site's 404 page, signed in if the visitor is (the
// logout form needs the session's CSRF token).
func (s *Site) notFound(c *gin.Context) {
	s.render(c, http.StatusNotFound, "notfound", s.visitorPage(c, "Page introuvable"))
}

// visitorPage starts an error page for whoever is signed in, so that the
// logout form stays on every page. Failing to read the session leaves the
// page signed out: the error is what it shows.
func (s *Site) visitorPage(c *gin.Context, title string) page {
	me, _ := s.session(c) // nil on error
	return pageFor(me, title)
}

// toLogin sends the visitor to the login page, to come back here after.
func (s *Site) toLogin(c *gin.Context) { toSignIn(c, "/login", "/orders") }

// toSignIn sends the visitor to the sign-in page at loginPath, to come
// back here after; to fallback when this request is not one to repeat (not
// a GET, or a live part's).
func toSignIn(c *gin.Context, loginPath, fallback string) {
	next := c.Request.URL.RequestURI()
	if c.Request.Method != http.MethodGet || strings.HasSuffix(c.Request.URL.Path, "/live") {
		next = fallback
	}
	target := loginPath + "?next=" + url.QueryEscape(next)
	if c.GetHeader("HX-Request") != "" {
		// A live part's request: htmx follows this header with a full
		// navigation (a redirect would be followed and swapped in).
		c.Header("HX-Redirect", target)
		c.Status(http.StatusUnauthorized)
		return
	}
	c.Redirect(http.StatusSeeOther, target)
}

// safeNext keeps a post-login destination only if it is a path of the
// site: parsed with url.Parse, no scheme and no host, starting with one
// slash, and no control character anywhere (browsers drop tab, CR and LF
// from URLs, so "/\t/evil.example" would become "//evil.example", another
// site), nor a backslash (read as a slash by browsers).
func safeNext(next string) string {
	const home = "/orders"
	if next == "" || len(next) > 2048 || !strings.HasPrefix(next, "/") ||
		strings.ContainsAny(next, "\\") || strings.ContainsFunc(next, isControl) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.HasPrefix(next, "//") {
		return home
	}
	return next
}

// isControl: C0 and C1 control characters and DEL.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }
