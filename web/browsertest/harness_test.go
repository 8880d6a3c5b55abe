package browsertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/chainwatch/evm"
	"github.com/kernodeck/kernodeck/chainwatch/utxo"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/web"
)

// ltcConfirmations is the Litecoin confirmation policy of these tests.
const ltcConfirmations = 2

// ethConfirmations is the Ethereum confirmation policy of these tests
// (geth --dev mines a block a second).
const ethConfirmations = 2

// shop is the whole service for one test: Temporal dev server, worker with
// the real activities, PostgreSQL, the API with the web site, and (with
// litecoin) a Litecoin Core regtest node followed by a real chain watcher.
type shop struct {
	t      *testing.T
	env    *apptest.Env
	srv    *httptest.Server
	ltcURL string
	// gethURL is the geth --dev node's (with ethereum).
	gethURL string
}

type shopOptions struct {
	// litecoin: a Litecoin Core regtest node followed by a chain watcher.
	litecoin bool
	// ethereum: a geth --dev node followed by a chain watcher, and payment
	// requests in ETH on it.
	ethereum bool
	// ltcRequests: payment requests in LTC on Litecoin are offered (their
	// addresses derived from the regtest key) without a node: nothing pays
	// them, nothing watches them. Implied by litecoin.
	ltcRequests bool
	// deadline: how long a payment request is valid (watchtest's default
	// when zero).
	deadline time.Duration
	// streamMaxAge: the API's SSEMaxAge (its default when zero).
	streamMaxAge time.Duration
	// agents are support agents (token: name) besides apptest's; limits
	// their four-eyes threshold and daily cap (none reached when zero).
	agents map[string]string
	limits domain.SupportLimits
	// roles are the agents' roles beyond agent (apptest.AgentName's
	// included).
	roles map[string]domain.SupportRoles
	// casePageSize is a page of the support list (its default when zero).
	casePageSize int
	// payouts: the site and the console offer payouts
	// (apptest.RegtestPayouts; the watcher broadcasts LTC batches).
	payouts bool
}

func newShop(t *testing.T, o shopOptions) *shop {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: needs Chromium, the Temporal CLI and PostgreSQL (scripts/ensure-tools.sh)")
	}
	networks := map[string]payments.Network{}
	var ltcURL string
	var ltcPort int
	if o.litecoin {
		ltcPort = freePort(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		node, err := devnodes.StartLitecoinOn(ctx, t.TempDir(), ltcPort)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Stop)
		ltcURL = devnodes.LitecoinURLOn(ltcPort)
	}
	if o.litecoin || o.ltcRequests {
		acc, err := hdwallet.ParseAccountKey(hdwallet.Network("litecoin-regtest"), devnodes.LitecoinRegtestXpub)
		if err != nil {
			t.Fatal(err)
		}
		networks[domain.NetworkLitecoin] = payments.Network{Deriver: acc}
	}
	var gethURL string
	if o.ethereum {
		port := freePort(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		node, err := devnodes.StartGethOn(ctx, t.TempDir(), port)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Stop)
		gethURL = devnodes.GethURLOn(port)
		acc, err := hdwallet.ParseAccountKey(hdwallet.Ethereum, devnodes.EthereumXpub)
		if err != nil {
			t.Fatal(err)
		}
		networks[domain.NetworkEthereum] = payments.Network{Deriver: acc}
	}
	var payouts *apptest.Payouts
	if o.payouts {
		payouts = apptest.RegtestPayouts(t)
	}
	env := apptest.New(t, apptest.Options{Networks: networks, Deadline: o.deadline, Payouts: payouts})
	if o.litecoin {
		// The watcher stops before the harness closes its database.
		wctx, stop := context.WithCancel(env.Ctx)
		done := make(chan struct{})
		t.Cleanup(func() { stop(); <-done })
		chain, err := utxo.New(utxo.Config{Host: fmt.Sprintf("http://127.0.0.1:%d", ltcPort),
			User: "kernodeck", Pass: "kernodeck-dev", Network: domain.NetworkLitecoin})
		if err != nil {
			t.Fatal(err)
		}
		w := env.WatcherWith(chain, app.WatcherOptions{Confirmations: ltcConfirmations, Broadcaster: chain})
		go func() { defer close(done); _ = w.Run(wctx) }()
	}
	if o.ethereum {
		chain, err := evm.New(env.Ctx, evm.Config{RPCURL: gethURL, ChainID: 1337})
		if err != nil {
			t.Fatal(err)
		}
		w := env.WatcherWith(chain, app.WatcherOptions{Confirmations: ethConfirmations})
		chain.SetWatched(evm.IndexFilter(w.Index()))
		wctx, stop := context.WithCancel(env.Ctx)
		done := make(chan struct{})
		t.Cleanup(func() { stop(); <-done; chain.Close() })
		go func() { defer close(done); _ = w.Run(wctx) }()
	}
	site, err := web.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := env.ServeAPI(api.Config{Confirmations: map[string]int64{domain.NetworkLitecoin: ltcConfirmations, domain.NetworkEthereum: ethConfirmations},
		SSEMaxAge: o.streamMaxAge, AgentTokens: o.agents, SupportLimits: o.limits, AgentRoles: o.roles,
		CasePageSize: o.casePageSize}, site)
	return &shop{t: t, env: env, srv: srv, ltcURL: ltcURL, gethURL: gethURL}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// browser starts a fresh headless Chromium (its own profile: no cookie
// shared with another browser of the test) and returns a tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatal("chromium not installed: run scripts/ensure-tools.sh (scripts/tools.d/30-web.sh)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath("/usr/bin/chromium"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // the tests run as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// failPage fails the test with the page's text, to see what it showed.
func failPage(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	// Bounded: a browser that stopped answering must not hang the test.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	t.Fatalf("%s: %v\nat %s, page text:\n%s", what, err, loc, body)
}

// run runs browser steps with a deadline; a failure fails the test.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		failPage(t, ctx, what, err)
	}
}

// eval runs JavaScript in the page and returns its value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](js))
	if err != nil {
		failPage(t, ctx, "eval "+js, err)
	}
	return v
}

// text reads the text of the first element matching the CSS selector.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		failPage(t, ctx, "read "+sel, err)
	}
	return strings.TrimSpace(s)
}

// waitText waits until the element matching sel contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want)
	waitJS(t, ctx, fmt.Sprintf("%s to contain %q", sel, want), js)
}

// waitJS polls a JavaScript condition in the page (60 s at most).
func waitJS(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 70*time.Second)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		failPage(t, ctx, "wait for "+what, err)
	}
}

// click, typeIn and visible are the steps the tests use, by CSS selector.
func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
func typeIn(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SendKeys(chromedp.CSS(sel), v)
}
func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// setSelect sets a <select> and fires "change" as a user's choice does.
func setSelect(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
			e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, sel, value))(ctx, tg)
		return err
	})
}

var screenshotOnce sync.Once

// screenshotDir is where the tests write their screenshots: $KERNODECK_SCREENSHOT_DIR,
// else .screenshots/ at the repository root (ignored by git).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KERNODECK_SCREENSHOT_DIR")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	screenshotOnce.Do(func() { t.Logf("screenshots in %s", dir) })
	return dir
}

// screenshots checks the page (checkPage) and saves it whole at 1280 px
// and 375 px wide (PNG).
func screenshots(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	a11yPage(t, ctx, name, screenshotDir(t))
}

// checkPage checks what every page must do, on the page the browser
// shows: every control has a label, nothing is wider than the screen at
// 375 px (no sideways scrolling on a phone) nor at 1280 px, every visible
// text passes WCAG AA contrast, and every focusable element is reached
// with Tab and shows a focus indicator.
func checkPage(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	a11yPage(t, ctx, name, "")
}

func a11yPage(t *testing.T, ctx context.Context, name, shotDir string) {
	t.Helper()
	// The viewport the test goes on with, restored at the end (and waited
	// for) before any click: a click computed on the narrow layout would
	// miss its target.
	size := eval[[]int64](t, ctx, `[window.innerWidth, window.innerHeight]`)
	if unlabelled := eval[[]string](t, ctx, unlabelledJS); len(unlabelled) > 0 {
		t.Errorf("%s: controls without a label: %v", name, unlabelled)
	}
	if low := eval[[]string](t, ctx, lowContrastJS); len(low) > 0 {
		t.Errorf("%s: text below WCAG AA contrast: %v", name, low)
	}
	focusRings(t, ctx, name)
	for _, width := range []int64{1280, 375} {
		atWidth(t, ctx, width)
		o := eval[overflow](t, ctx, overflowJS)
		if o.Scroll > o.Client {
			t.Errorf("%s at %d px: the page scrolls sideways (%d px of content for %d px); wide: %v", name, width, o.Scroll, o.Client, o.Wide)
		}
		if shotDir == "" {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			failPage(t, ctx, "screenshot "+name, err)
		}
		if cfg, err := png.DecodeConfig(bytes.NewReader(shot)); err != nil || int64(cfg.Width) != width {
			t.Errorf("%s: screenshot at %d px is %d px wide (%v)", name, width, cfg.Width, err)
		}
		if err := os.WriteFile(filepath.Join(shotDir, fmt.Sprintf("%s-%d.png", name, width)), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "restore the viewport", chromedp.EmulateViewport(size[0], size[1]), scrollbarsHidden(false))
	waitJS(t, ctx, fmt.Sprintf("the layout back to %d px", size[0]), fmt.Sprintf(`window.innerWidth === %d`, size[0]))
	eval[bool](t, ctx, `if (document.activeElement) document.activeElement.blur(); true`)
}

// atWidth lays the page out at exactly width CSS pixels: the scrollbars are
// hidden, so none of the width goes to them.
func atWidth(t *testing.T, ctx context.Context, width int64) {
	t.Helper()
	run(t, ctx, "viewport", scrollbarsHidden(true), chromedp.EmulateViewport(width, 900))
	waitJS(t, ctx, fmt.Sprintf("a layout %d px wide", width),
		fmt.Sprintf(`window.innerWidth === %d && document.documentElement.clientWidth === %d`, width, width))
}

func scrollbarsHidden(hidden bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetScrollbarsHidden, emulation.SetScrollbarsHiddenParams{Hidden: hidden})
		return err
	})
}

// register creates a customer through the site's form and stays signed in.
func (s *shop) register(t *testing.T, ctx context.Context, first, email string) {
	t.Helper()
	run(t, ctx, "register "+email,
		chromedp.Navigate(s.srv.URL+"/register"),
		typeIn("#first_name", first),
		typeIn("#last_name", "Testeur"),
		typeIn("#email", email),
		typeIn("#password", "correct horse battery staple"),
		click(`form[action="/register"] button[type=submit]`),
		visible(`form[action="/logout"]`),
	)
	// Confirmed as if the mailed link were opened: the confirmation page
	// has its own tests (package web).
	if _, err := s.env.DB.Exec(`UPDATE accounts SET email_verified_at = now() WHERE lower(email) = lower($1)`, email); err != nil {
		t.Fatal(err)
	}
}

// orderThroughSite configures and orders through the configurator, signed
// in, and returns the order's reference (the browser is on its page).
func (s *shop) orderThroughSite(t *testing.T, ctx context.Context, model string, lots, days int) string {
	t.Helper()
	run(t, ctx, "order "+model,
		chromedp.Navigate(fmt.Sprintf("%s/?gpu_model=%s&lots=%d&duration_days=%d", s.srv.URL, model, lots, days)),
		click(`button[formaction="/order"]`),
		visible(`form[action="/orders"]`),
		click(`form[action="/orders"] button.primary`),
		visible(`#paiement`),
	)
	return strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/orders/")
}

// support calls the support API as an agent (what `kernodeck support` does).
func (s *shop) support(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+apptest.AgentToken)
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", rand.Text()) // a new support action
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return out
}

// kernodeckCLI builds the kernodeck command once per test binary.
var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

func kernodeckCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kernodeck-cli")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "kernodeck")
		out, err := exec.Command("go", "build", "-o", cliPath, "github.com/kernodeck/kernodeck/cmd/kernodeck").CombinedOutput()
		if err != nil {
			cliErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// cli runs `kernodeck support ...` against the test's API.
func (s *shop) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(kernodeckCLI(t), args...)
	cmd.Env = append(os.Environ(), "KERNODECK_SUPPORT_URL="+s.srv.URL, "KERNODECK_SUPPORT_TOKEN="+apptest.AgentToken)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kernodeck %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// download lets the browser download into a fresh folder, runs act (the
// click that downloads) and waits for the download to complete: the
// folder holds the file, under the name its answer gave.
func download(t *testing.T, ctx context.Context, what string, act chromedp.Action[chromedp.Void]) string {
	t.Helper()
	dir := t.TempDir()
	done := make(chan struct{})
	var once sync.Once
	if err := chromedp.ListenBrowser(ctx, func(ev any) {
		if p, ok := ev.(*cdpbrowser.EventDownloadProgress); ok && p.State == cdpbrowser.DownloadProgressStateCompleted {
			once.Do(func() { close(done) })
		}
	}); err != nil {
		t.Fatal(err)
	}
	events := true
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &events}); err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
	run(t, ctx, "download "+what, act)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		entries, _ := os.ReadDir(dir)
		t.Fatalf("the download of %s did not complete (folder: %v)", what, entries)
	}
	return dir
}

// consoleSignIn signs the browser in to the support console with token
// (it lands on the queue).
func (s *shop) consoleSignIn(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	run(t, ctx, "sign in to the console",
		chromedp.Navigate(s.srv.URL+"/support"),
		typeIn("#token", token),
		click(`form[action="/support/login"] button[type=submit]`),
		visible(".lead"),
	)
}
