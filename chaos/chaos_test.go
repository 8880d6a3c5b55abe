//go:build chaos

// The chaos run (not part of scripts/test.sh; BENCHMARKS.md has the last
// result; KD_CHAOS_ORDERS and KD_CHAOS_SECONDS size it). Orders are paid on a Litecoin Core regtest chain while
// the worker, chainwatch and API processes are killed with SIGKILL and
// restarted at random, and a PostgreSQL server of the test's own is
// restarted once in the middle. Then every order must be active exactly
// once with one reservation, payments, orders and timelines must agree, no
// mail may be sent twice, and the p95 over orders of the longest time an
// order waited for its next step after a kill must be at most 20 s.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/kernodeck/kernodeck/apiclient"
	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/devserver/devservertest"
	"github.com/kernodeck/kernodeck/notify/mailtest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
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

// --- a PostgreSQL server of the test's own (restarting the machine's one
// would break everyone else's tests) ---

type pgServer struct {
	t        *testing.T
	bin, dir string
	port     int
}

func (p *pgServer) ctl(args ...string) {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, "pg_ctl"), append([]string{"-D", p.dir, "-w", "-l", p.dir + ".log"}, args...)...)
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

// asPostgres runs cmd as the postgres user when the test runs as root
// (PostgreSQL refuses to run as root).
func asPostgres(cmd *exec.Cmd) {
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}

func startPG(t *testing.T) *pgServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("initdb not found (Debian's postgresql package)")
	}
	base, err := os.MkdirTemp("", "kd-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	_ = os.Chmod(base, 0o777)
	p := &pgServer{t: t, bin: filepath.Dir(bins[0]), dir: filepath.Join(base, "data"), port: freePort(t)}
	cmd := exec.Command(bins[0], "-D", p.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.ctl("-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", p.port, base), "start")
	t.Cleanup(func() { p.ctl("-m", "immediate", "stop") })
	return p
}

func (p *pgServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// --- the service's processes ---

type proc struct {
	name string
	args []string
	env  []string
	log  *os.File

	mu  sync.Mutex
	cmd *exec.Cmd
}

func (p *proc) start(t *testing.T, bin string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Errorf("start %s: %v", p.name, err)
		return
	}
	p.cmd = cmd
}

// kill is a crash: SIGKILL, no shutdown.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

type kill struct {
	name          string
	at, restarted time.Time
}

// --- the test ---

func TestChaos(t *testing.T) {
	orders := envInt("KD_CHAOS_ORDERS", 200)
	chaosFor := time.Duration(envInt("KD_CHAOS_SECONDS", 240)) * time.Second
	started := time.Now()
	ctx := context.Background()
	dir := t.TempDir()

	pg := startPG(t)
	mail := mailtest.Start(t)
	temporal := devservertest.Start(t)
	ltcPort := freePort(t)
	ltcNode, err := devnodes.StartLitecoinOn(ctx, dir, ltcPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ltcNode.Stop()
	ltc := devnodes.LitecoinURLOn(ltcPort)
	// Mature coins for every order (a 30-day order is ~2.6 LTC): 100 more
	// blocks mature 5,000 LTC. Litecoin Core 0.21 cannot mine past regtest
	// height 431 with wallet transactions pending (MWEB activation:
	// bad-txns-vin-empty), so the miner below stays under it.
	if err := devnodes.MineLitecoin(ctx, ltc, 100); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(dir, "kernodeck")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kernodeck").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const agentToken = "chaos-agent-token-0123456789"
	base := append(os.Environ(),
		"KERNODECK_DATABASE_URL="+pg.url("kernodeck"),
		"TEMPORAL_ADDRESS="+temporal,
		"TEMPORAL_CONFIG_FILE="+filepath.Join(dir, "none.toml"),
		"KERNODECK_HTTP_ADDR="+apiAddr,
		"KERNODECK_SECRET_KEYS=chaos1:Y2hhb3MtdGVzdC1rZXktbm90LWZvci1wcm9kLXVzZSE=",
		"KERNODECK_SUPPORT_TOKENS=chaos:"+agentToken,
		"KERNODECK_COOKIE_SECURE=false",
		"KERNODECK_TRUSTED_PROXIES=127.0.0.1", // customers register "behind" it
		// Their payment requests come from this one address: more unpaid
		// holds than a real network gets.
		"KERNODECK_UNPAID_HOLDS_PER_NETWORK=1000",
		"KERNODECK_LOG_LEVEL=warn",
		"KERNODECK_RATES=static", "KERNODECK_STATIC_RATES=LTC=90",
		"KERNODECK_LITECOIN_NODE_URL="+ltc,
		"KERNODECK_XPUB_LITECOIN="+devnodes.LitecoinRegtestXpub,
		"KERNODECK_LITECOIN_KEY_NETWORK=litecoin-regtest",
		"KERNODECK_CONFIRMATIONS=litecoin=2",
		"KERNODECK_WATCHER_POLL=500ms",
		"KERNODECK_STARTER_INTERVAL=5s",
		"KERNODECK_SMTP_HOST=127.0.0.1", "KERNODECK_SMTP_PORT="+strconv.Itoa(mail.SMTPPort),
		"KERNODECK_SMTP_TLS=none", "KERNODECK_MAIL_POLL=500ms",
	)
	admin, err := sqlx.Open("postgres", pg.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE kernodeck`); err != nil {
		t.Fatal(err)
	}
	migrate := exec.Command(bin, "migrate")
	migrate.Env = roleEnv(base, "migrate")
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	db, err := sqlx.Open("postgres", pg.url("kernodeck"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE gpu_inventory SET total_gpus = 100000`); err != nil {
		t.Fatal(err)
	}

	var procs []*proc
	for _, name := range []string{"worker", "chainwatch", "api"} {
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		p := &proc{name: name, args: []string{name}, log: logf,
			env: append(roleEnv(base, name), fmt.Sprintf("KERNODECK_METRICS_ADDR=127.0.0.1:%d", freePort(t)))}
		p.start(t, bin)
		procs = append(procs, p)
	}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
		if t.Failed() {
			for _, p := range procs {
				raw, _ := os.ReadFile(p.log.Name())
				if len(raw) > 8000 {
					raw = raw[len(raw)-8000:]
				}
				t.Logf("--- %s log (tail) ---\n%s", p.name, raw)
			}
		}
	}()
	api := apiclient.New("http://" + apiAddr)
	waitFor(t, 90*time.Second, "the API", func() bool {
		st, _ := api.Call(ctx, "", "GET", "/healthz", "", nil, nil)
		return st == http.StatusOK
	})

	// Orders, one customer each (so each customer's mails are told apart).
	type order struct{ ref, address, amount string }
	list := make([]order, orders)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var setupErr error
	var mu sync.Mutex
	for i := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o, err := newPaidableOrder(ctx, api, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && setupErr == nil {
				setupErr = err
			}
			list[i] = order{ref: o[0], address: o[1], amount: o[2]}
		}()
	}
	wg.Wait()
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	t.Logf("%d orders with a payment request in %s", orders, time.Since(started).Round(time.Second))

	// Pay them all while the chaos runs; a miner adds a block every 2 s.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		tk := time.NewTicker(3 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				var h int64
				if err := devnodes.RPC(ctx, ltc, "getblockcount", nil, &h); err == nil && h < 425 {
					_ = devnodes.MineLitecoin(ctx, ltc, 1)
				}
			}
		}
	}()
	bg.Add(1)
	go func() {
		defer bg.Done()
		for _, o := range list {
			if err := devnodes.RPC(ctx, ltc, "sendtoaddress", []any{o.address, json.Number(o.amount)}, nil); err != nil {
				t.Errorf("pay %s: %v", o.ref, err)
			}
			// Spread over the first 80 % of the chaos: orders are in flight
			// all along it, not queued behind each other at once.
			time.Sleep(chaosFor * 8 / 10 / time.Duration(len(list)))
		}
	}()

	// Chaos: kill one process at random every 2-6 s, restart it 0.5-2 s
	// later; restart PostgreSQL once, half-way.
	var kills []kill
	chaosEnd := time.Now().Add(chaosFor)
	pgDone := false
	for time.Now().Before(chaosEnd) {
		time.Sleep(time.Duration(2000+rand.IntN(4000)) * time.Millisecond)
		if !pgDone && time.Until(chaosEnd) < chaosFor/2 {
			k := kill{name: "postgres", at: time.Now()}
			pg.ctl("-m", "immediate", "restart")
			k.restarted = time.Now()
			kills = append(kills, k)
			pgDone = true
			continue
		}
		p := procs[rand.IntN(len(procs))]
		k := kill{name: p.name, at: time.Now()}
		p.kill()
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		p.start(t, bin)
		k.restarted = time.Now()
		kills = append(kills, k)
	}
	t.Logf("chaos over after %d kills (%s)", len(kills), countKills(kills))

	// Every order must become active by itself.
	waitFor(t, 10*time.Minute, "every order active", func() bool {
		var n int
		_ = db.Get(&n, `SELECT count(*) FROM orders WHERE status = 'active'`)
		return n == orders
	})
	close(stop)
	bg.Wait()
	t.Logf("all %d orders active %s after the start", orders, time.Since(started).Round(time.Second))

	check := func(what, query string) {
		t.Helper()
		var bad []string
		if err := db.Select(&bad, query); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(bad) > 0 {
			t.Errorf("%s: %v", what, bad)
		}
	}
	check("orders not active", `SELECT ref FROM orders WHERE status <> 'active'`)
	check("reservations not exactly one", `
		SELECT o.ref FROM orders o LEFT JOIN gpu_reservations r ON r.order_ref = o.ref
		GROUP BY o.ref HAVING count(r.order_ref) <> 1`)
	check("paid amount differs from the confirmed chain payments", `
		SELECT o.ref FROM orders o
		LEFT JOIN payment_intents i ON i.target_ref = o.ref
		LEFT JOIN chain_payments p ON p.intent_id = i.id AND p.state = 'confirmed'
		GROUP BY o.ref, o.paid_cents, o.total_cents
		HAVING o.paid_cents <> o.total_cents OR COALESCE(sum(p.amount_cents), 0) < o.total_cents OR count(p.txid) <> 1`)
	check("timeline events that must be once", `
		SELECT ref || ' ' || kind FROM timeline_events
		WHERE kind IN ('created', 'paid', 'payment_confirmed', 'access_available')
		GROUP BY ref, kind HAVING count(*) <> 1`)
	check("provisioning steps recorded twice", `
		SELECT ref || ' ' || (data->>'step') FROM timeline_events WHERE kind = 'provisioning_step'
		GROUP BY ref, data->>'step', idem_key HAVING count(*) > 1`)
	check("ledger transactions not balanced", `
		SELECT transaction_id::text FROM ledger_entries GROUP BY transaction_id HAVING sum(amount_cents) <> 0`)

	// No mail twice: each (recipient, subject) once in the SMTP server.
	waitFor(t, 2*time.Minute, "the mail outbox to drain", func() bool {
		var n int
		_ = db.Get(&n, `SELECT count(*) FROM mail_outbox WHERE state IN ('pending', 'sending')`)
		return n == 0
	})
	seen := map[string]int{}
	for _, m := range mailList(t, mail.APIURL) {
		seen[m]++
	}
	var outbox int
	_ = db.Get(&outbox, `SELECT count(*) FROM mail_outbox WHERE state = 'sent'`)
	for k, n := range seen {
		if n > 1 {
			t.Errorf("mail sent %d times: %s", n, k)
		}
	}
	var unknown int
	_ = db.Get(&unknown, `SELECT count(*) FROM mail_outbox WHERE state = 'unknown'`)
	received := 0
	for _, n := range seen {
		received += n
	}
	t.Logf("mails: %d received (%d distinct), %d outbox rows sent, %d unknown (a dispatcher killed mid-delivery: not resent)",
		received, len(seen), outbox, unknown)
	// (mailpit keeps its latest 500 messages: fewer may be listed than sent.)

	// Per order, the longest it waited for its next step after a kill.
	type ev struct {
		Ref string    `db:"ref"`
		At  time.Time `db:"at"`
	}
	// Only the events from the moment the watcher stored the payment: before
	// it, the order waits for its customer, not for the service.
	var evs []ev
	if err := db.Select(&evs, `
		SELECT e.ref, e.at FROM timeline_events e
		JOIN payment_intents i ON i.target_ref = e.ref
		JOIN chain_payments p ON p.intent_id = i.id
		WHERE e.at >= p.seen_at ORDER BY e.ref, e.at`); err != nil {
		t.Fatal(err)
	}
	byRef := map[string][]time.Time{}
	for _, e := range evs {
		byRef[e.Ref] = append(byRef[e.Ref], e.At)
	}
	// For an order in flight at a kill (paid, an event before it, one after), the
	// wait is from the killed process's restart to the order's next event
	// (negative, so not the longest, if the order moved on before the
	// restart); also reported from the kill itself.
	var fromRestart, fromKill []time.Duration
	for _, o := range list {
		ts := byRef[o.ref]
		var longest, longestKill time.Duration
		for _, k := range kills {
			i, _ := slices.BinarySearchFunc(ts, k.at, func(a, b time.Time) int { return a.Compare(b) })
			if i == 0 || i == len(ts) {
				continue
			}
			longest = max(longest, ts[i].Sub(k.restarted))
			longestKill = max(longestKill, ts[i].Sub(k.at))
		}
		fromRestart = append(fromRestart, longest)
		fromKill = append(fromKill, longestKill)
	}
	q := func(d []time.Duration, p float64) time.Duration {
		slices.Sort(d)
		return d[int(p*float64(len(d)-1))].Round(100 * time.Millisecond)
	}
	t.Logf("longest wait per order after a restart: p50 %s, p95 %s, max %s; counted from the kill: p50 %s, p95 %s, max %s",
		q(fromRestart, .5), q(fromRestart, .95), q(fromRestart, 1), q(fromKill, .5), q(fromKill, .95), q(fromKill, 1))
	t.Logf("chaos run: %d orders, %d kills, %s in all", orders, len(kills), time.Since(started).Round(time.Second))
	if p95 := q(fromRestart, .95); p95 > 20*time.Second {
		t.Errorf("p95 of the longest wait after a restart is %s, want <= 20 s", p95)
	}
}

func countKills(ks []kill) string {
	n := map[string]int{}
	for _, k := range ks {
		n[k.name]++
	}
	var parts []string
	for _, name := range []string{"worker", "chainwatch", "api", "postgres"} {
		parts = append(parts, fmt.Sprintf("%s %d", name, n[name]))
	}
	return strings.Join(parts, ", ")
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// mailList lists (recipient, subject) of every message mailpit received,
// page by page.
func mailList(t *testing.T, apiURL string) []string {
	var keys []string
	for start := 0; ; {
		resp, err := http.Get(fmt.Sprintf("%s/api/v1/messages?start=%d&limit=200", apiURL, start))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Total    int               `json:"total"`
			Messages []mailtestMessage `json:"messages"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var to []string
			for _, a := range m.To {
				to = append(to, a.Address)
			}
			keys = append(keys, strings.Join(to, ",")+" | "+m.Subject)
		}
		start += len(out.Messages)
		if len(out.Messages) == 0 || start >= out.Total {
			return keys
		}
	}
}

type mailtestMessage struct {
	Subject string `json:"Subject"`
	To      []struct {
		Address string `json:"Address"`
	} `json:"To"`
}

// newPaidableOrder registers customer i, orders, and asks for a Litecoin
// payment request: reference, address, amount.
func newPaidableOrder(ctx context.Context, api *apiclient.Client, i int) ([3]string, error) {
	ip := fmt.Sprintf("198.51.100.%d", 1+i/5) // TEST-NET-2, 5 customers each
	tok, err := api.Register(ctx, ip, fmt.Sprintf("chaos-%d@example.com", i))
	if err != nil {
		return [3]string{}, err
	}
	ref, err := api.CreateOrder(ctx, tok, "rtx-a5000", 30)
	if err != nil {
		return [3]string{}, err
	}
	// The workflow may still be starting: retry the request a few times.
	for attempt := 0; ; attempt++ {
		addr, amount, err := api.PaymentRequest(ctx, tok, ref, "LTC", "litecoin")
		if err == nil {
			return [3]string{ref, addr, amount}, nil
		}
		if attempt == 20 {
			return [3]string{}, err
		}
		time.Sleep(time.Second)
	}
}

// roleEnv is env without the secrets the process kind role must not hold
// (config.Holds): each refuses to start with another kind's (docs/secrets.md).
func roleEnv(env []string, role string) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); config.Holds(role, k) {
			out = append(out, kv)
		}
	}
	return out
}
