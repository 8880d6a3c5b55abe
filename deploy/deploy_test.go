package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/workflows"
)

// units are the unit files, and the names systemd-analyze verifies them
// under (templates as one instance).
var units = map[string]string{
	"kernodeck-api@.service":        "kernodeck-api@1.service",
	"kernodeck-worker@.service":     "kernodeck-worker@1.service",
	"kernodeck-chainwatch@.service": "kernodeck-chainwatch@1.service",
	"kernodeck-migrate.service":     "kernodeck-migrate.service",
	"kernodeck-mail.service":        "kernodeck-mail.service",
	"kernodeck.target":              "kernodeck.target",
	"temporal-server.service":       "temporal-server.service",
}

// TestSystemdUnitsVerify runs systemd-analyze verify on every unit, with the
// binaries they start replaced by stubs (verify refuses a missing
// executable). Any diagnostic fails the test: verify exits 0 on unknown keys
// and unparsable values, and only says so.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kernodeck", "temporal-server"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"verify", "--man=no", "--generators=no"}
	for file, name := range units {
		raw, err := os.ReadFile(filepath.Join("systemd", file))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(file, ".service") && !bytes.Contains(raw, []byte("ExecStart=/usr/local/bin/")) {
			t.Errorf("%s: ExecStart should start a binary in /usr/local/bin", file)
		}
		raw = bytes.ReplaceAll(raw, []byte("/usr/local/bin/"), []byte(bin+"/"))
		if err := os.WriteFile(filepath.Join(dir, file), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if name != file {
			if err := os.Symlink(file, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "./"+name)
	}
	slices.Sort(args[3:])
	cmd := exec.Command(analyze, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	// Lines about the machine itself (a container without systemd as PID 1)
	// are not about the units.
	var diags []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "$container") && !strings.Contains(line, "PID 1") {
			diags = append(diags, line)
		}
	}
	if err != nil || len(diags) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, strings.Join(diags, "\n"))
	}
}

// TestProdlikeScript checks scripts/prodlike.sh's syntax, that it
// registers exactly the search attributes the workflows use, and that its
// btcd mines to the development payer whose coins devnodes.SendBitcoin
// spends.
func TestProdlikeScript(t *testing.T) {
	const script = "../scripts/prodlike.sh"
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^SEARCH_ATTRIBUTES="([^"]*)"`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no SEARCH_ATTRIBUTES line in prodlike.sh")
	}
	got := strings.Fields(string(m[1]))
	want := slices.Clone(workflows.SearchAttributeNames)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("prodlike.sh registers %v, the workflows use %v", got, want)
	}
	payer, err := devnodes.BitcoinPayerAddress()
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^BTC_PAYER=(\S+)$`).FindSubmatch(raw); m == nil || string(m[1]) != payer {
		t.Errorf("prodlike.sh's BTC_PAYER line %q, the development payer is %s", m, payer)
	}
}

// TestTemporalConfigVariables checks that the Temporal server's
// configuration template is rendered as one (the server looks for
// "enable-template" in its first KB), and that every variable it reads is
// in the example environment file of the unit and written by prodlike.sh,
// and nothing else is.
func TestTemporalConfigVariables(t *testing.T) {
	tpl, err := os.ReadFile("temporal/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tpl[:min(len(tpl), 1024)], []byte("# enable-template")) {
		t.Error("production.yaml: no '# enable-template' comment in the first 1 KB")
	}
	vars := func(re string, raw []byte) []string {
		var out []string
		for _, m := range regexp.MustCompile(re).FindAllSubmatch(raw, -1) {
			out = append(out, string(m[1]))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	used := vars(`env "(KD_TEMPORAL_[A-Z_]+)"`, tpl)
	example, err := os.ReadFile("systemd/temporal.env.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := vars(`(?m)^(KD_TEMPORAL_[A-Z_]+)=`, example); !slices.Equal(got, used) {
		t.Errorf("temporal.env.example sets %v\nproduction.yaml reads %v", got, used)
	}
	script, err := os.ReadFile("../scripts/prodlike.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars(`(?m)^(KD_TEMPORAL_[A-Z_]+)=`, script) {
		if !slices.Contains(used, v) {
			t.Errorf("prodlike.sh sets %s, which production.yaml does not read", v)
		}
	}
}

// TestProdlikeSmallBurst is issue 23's burst in small, so the
// production-shaped deployment cannot rot: scripts/prodlike.sh (the Temporal
// server on PostgreSQL behind mutual TLS, two api, two worker, two
// chainwatch, Litecoin regtest and btcd, both pushing to the watchers) and
// on it `kdload burst`: 50 orders paid in LTC in one block and 5 in BTC in
// one btcd block, then the chainwatch holding the Litecoin lease, a worker
// and an api SIGKILLed (prodlike restarts them). kdload fails unless every
// order ends active, paid once by its one chain payment (in a transaction
// it broadcast, in a block it mined), and the ledger balances; the
// standby must take the lease over, and no customer read be answered 5xx.
// The Temporal server must have started activities eagerly
// (deploy/temporal/dynamicconfig.yaml), as its metrics count them.
// Two to three minutes; the Temporal server is built by
// scripts/ensure-tools.sh (or on the first run, ~12 minutes).
func TestProdlikeSmallBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("the production-shaped deployment takes minutes")
	}
	dir := prodlikeDir(t)
	cmd := exec.Command("scripts/prodlike.sh", "--", "go", "run", "./cmd/kdload", "burst",
		"-n", "50", "-btc", "5", "-c", "8", "-per-tx", "25", "-kill", "-bare-runs", "2", "-detect", "60s")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(),
		"KD_PRODLIKE_DIR="+dir,
		// Apart from a deployment started by hand (27000).
		"KD_PRODLIKE_PORT_BASE=28000",
		// One customer holds the 55 unpaid orders.
		"KERNODECK_MAX_UNPAID_ORDERS=1000", "KERNODECK_UNPAID_HOLDS_PER_ACCOUNT=1000",
		"KERNODECK_UNPAID_HOLDS_PER_NETWORK=100000", "KERNODECK_PAYMENT_REQUESTS_PER_HOUR=1000",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("prodlike burst: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^block -> active: .* \(50 orders;`),
		regexp.MustCompile(`btcd block \d+ holds the paying transaction`),
		regexp.MustCompile(`(?m)^BTC block -> active: .* \(5 orders;`),
		// Push: every payment seen in the mempools before the blocks.
		regexp.MustCompile(`broadcast -> payment_detected: 55 of 55`),
		regexp.MustCompile(`lease taken by the (standby|restarted) chainwatch-[12]`),
		regexp.MustCompile(`kill: worker-1 \(pid \d+\) SIGKILLed`),
		regexp.MustCompile(`kill: api-1 \(pid \d+\) SIGKILLed`),
		regexp.MustCompile(`customers' order reads during the burst: [1-9]\d* answered 2xx, 0 5xx`),
		regexp.MustCompile(`check: every order active`),
		regexp.MustCompile(`Temporal server: [1-9]\d* activity tasks started eagerly`),
		regexp.MustCompile(`Temporal server, from the block to the last order active: [1-9]\d* execution writes`),
		// The ceiling, run twice, each run's 50 rows written.
		regexp.MustCompile(`(?m)^bare loop 1: 50 signals sent .* 50 rows written`),
		regexp.MustCompile(`(?m)^bare loop 2: 50 signals sent .* 50 rows written`),
		// The customers read during the ceiling's runs as during the burst.
		regexp.MustCompile(`(?m)^bare loop 1, customers' order reads meanwhile: [1-9]\d* answered 2xx, 0 5xx`),
		regexp.MustCompile(`(?m)^bare loop 1, Temporal server from the first signal to the last row: [1-9]\d* execution writes`),
		regexp.MustCompile(`(?m)^ratio to the bare loop's median run: paid \d+ %, active \d+ %; to its fastest`),
	} {
		if !want.Match(out) {
			t.Errorf("no %q in the burst's output", want)
		}
	}
	t.Logf("output (go test -v shows it):\n%s", out)
}

// TestKernodeckUnitsHomeOutsideProtectHome: lib/pq stats
// $HOME/.postgresql/postgresql.crt on every TLS connection, and under
// ProtectHome=yes a home in /home answers "permission denied" (no
// connection opens). Every Kernodeck unit with ProtectHome=yes sets HOME
// outside the directories it hides.
func TestKernodeckUnitsHomeOutsideProtectHome(t *testing.T) {
	home := regexp.MustCompile(`(?m)^Environment=HOME=(\S+)$`)
	for file, raw := range kernodeckServices(t) {
		if !bytes.Contains(raw, []byte("\nProtectHome=yes\n")) {
			continue
		}
		m := home.FindSubmatch(raw)
		if m == nil {
			t.Errorf("%s: ProtectHome=yes and no Environment=HOME= outside /home", file)
			continue
		}
		for _, hidden := range []string{"/home", "/root", "/run/user"} {
			if h := string(m[1]); h == hidden || strings.HasPrefix(h, hidden+"/") {
				t.Errorf("%s: HOME=%s is hidden by ProtectHome=yes", file, h)
			}
		}
	}
}

// kernodeckServices are the Kernodeck service units' contents by file.
func kernodeckServices(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for file := range units {
		if !strings.HasPrefix(file, "kernodeck-") || !strings.HasSuffix(file, ".service") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("systemd", file))
		if err != nil {
			t.Fatal(err)
		}
		out[file] = raw
	}
	return out
}

// serviceRole is the Kernodeck command a unit starts (its process kind).
func serviceRole(t *testing.T, raw []byte) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/kernodeck (\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no ExecStart=/usr/local/bin/kernodeck COMMAND")
	}
	return string(m[1])
}

// Each Kernodeck unit runs as its own user with its own credentials
// (issue 38, item 3; docs/secrets.md): the api has no SSH key, no node and
// no SMTP credentials; only the worker has the SSH key, only chainwatch
// the node credentials, only the mail dispatcher the SMTP login. No
// secret in an environment file, an Environment= line or a command line.
func TestUnitsHoldOnlyTheirSecrets(t *testing.T) {
	userOf := map[string]string{}
	credsOf := map[string][]string{}
	for file, raw := range kernodeckServices(t) {
		role := serviceRole(t, raw)
		if !slices.Contains(config.Roles, role) {
			t.Errorf("%s starts `kernodeck %s`, not a role config.CheckRole knows", file, role)
		}
		user := ""
		if m := regexp.MustCompile(`(?m)^User=(\S+)$`).FindSubmatch(raw); m != nil {
			user = string(m[1])
		}
		if user != "kernodeck-"+role {
			t.Errorf("%s: User=%s, want kernodeck-%s (a user per process kind)", file, user, role)
		} else if other, ok := userOf[user]; ok {
			t.Errorf("%s and %s run as the same user %s", file, other, user)
		} else {
			userOf[user] = file
		}
		for _, c := range regexp.MustCompile(`(?m)^LoadCredential=([^:\s]+):(\S+)$`).FindAllSubmatch(raw, -1) {
			id, src := string(c[1]), string(c[2])
			if want := "/etc/kernodeck/credentials/" + role + "/" + id; src != want {
				t.Errorf("%s: credential %s from %s, want %s", file, id, src, want)
			}
			if strings.HasPrefix(id, "KERNODECK_") && !config.Holds(role, id) {
				t.Errorf("%s: the %s holds %s", file, role, id)
			}
			credsOf[role] = append(credsOf[role], id)
		}
		for _, e := range regexp.MustCompile(`(?m)^(?:Environment=|ExecStart=.*\s)(KERNODECK_[A-Z0-9_]+)=`).FindAllSubmatch(raw, -1) {
			if slices.Contains(config.SecretNames(), string(e[1])) {
				t.Errorf("%s sets the secret %s outside its credentials", file, e[1])
			}
		}
		if regexp.MustCompile(`(?m)^ExecStart=.*(--pw|pass|token|secret)`).Match(raw) {
			t.Errorf("%s: a secret on the command line?", file)
		}
	}
	for role, want := range map[string][]string{
		config.RoleAPI:        {"KERNODECK_DATABASE_URL", "KERNODECK_SECRET_KEYS", "KERNODECK_SUPPORT_TOKENS", "temporal-client.key"},
		config.RoleWorker:     {"KERNODECK_DATABASE_URL", "KERNODECK_SECRET_KEYS", "KERNODECK_SUPPORT_TOKENS", "KERNODECK_SSH_KEY_FILE", "temporal-client.key"},
		config.RoleChainwatch: {"KERNODECK_DATABASE_URL", "KERNODECK_SECRET_KEYS", "temporal-client.key"},
		config.RoleMail:       {"KERNODECK_DATABASE_URL", "KERNODECK_SECRET_KEYS", "KERNODECK_SMTP_USER", "KERNODECK_SMTP_PASSWORD"},
		config.RoleMigrate:    {"KERNODECK_DATABASE_URL"},
	} {
		got := slices.Clone(credsOf[role])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("the %s unit's credentials: %v, want %v", role, got, want)
		}
	}
	example, err := os.ReadFile("systemd/kernodeck.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^(KERNODECK_[A-Z0-9_]+)=`).FindAllSubmatch(example, -1) {
		if slices.Contains(config.SecretNames(), string(m[1])) || strings.Contains(string(m[1]), "_SMTP_") {
			t.Errorf("kernodeck.env.example, shared by every unit, sets %s", m[1])
		}
	}
}

// TestSystemdUnitsSecurity keeps the services' hardening: systemd-analyze
// security's exposure at most 2.0 (the one-shot migration 4.0).
func TestSystemdUnitsSecurity(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	for file, name := range units {
		if !strings.HasSuffix(file, ".service") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("systemd", file))
		if err != nil {
			t.Fatal(err)
		}
		// Offline, the binary need only exist.
		raw = bytes.ReplaceAll(raw, []byte("/usr/local/bin/kernodeck"), []byte("/bin/true"))
		raw = bytes.ReplaceAll(raw, []byte("/usr/local/bin/temporal-server"), []byte("/bin/true"))
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		threshold := "20"
		if file == "kernodeck-migrate.service" {
			threshold = "40"
		}
		cmd := exec.Command(analyze, "security", "--offline=true", "--threshold="+threshold, "./"+name)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Errorf("%s: systemd-analyze security above %s: %v\n%s", file, threshold, err, lines[len(lines)-1])
		}
	}
}

// TestUnitsRequireTheMigration: no Kernodeck process starts on a stale
// schema, and the migration runs on one machine (issue 38, item 2). Every
// Kernodeck service Requires= kernodeck-migrate.service and is ordered
// After= it, so a failed migration fails their start. The migration is a
// oneshot that runs again before each start (no RemainAfterExit: an active
// one would not run for the next release, and restarting it would restart
// every dependent at once), and only where its credential is
// (ConditionPathExists= on the file LoadCredential= reads): elsewhere it
// is skipped, which does not fail its dependents. kernodeck.target no
// longer pulls it in on every machine.
func TestUnitsRequireTheMigration(t *testing.T) {
	const migrate = "kernodeck-migrate.service"
	values := func(raw []byte, key string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`(?m)^`+key+`=(.*)$`).FindAllSubmatch(raw, -1) {
			out = append(out, strings.Fields(string(m[1]))...)
		}
		return out
	}
	services := kernodeckServices(t)
	for file, raw := range services {
		if file == migrate {
			continue
		}
		if !slices.Contains(values(raw, "Requires"), migrate) {
			t.Errorf("%s: no Requires=%s (it would start on a stale schema when the migration fails)", file, migrate)
		}
		if !slices.Contains(values(raw, "After"), migrate) {
			t.Errorf("%s: no After=%s (Requires= alone starts both at once)", file, migrate)
		}
	}
	raw, ok := services[migrate]
	if !ok {
		t.Fatalf("no %s", migrate)
	}
	if got := values(raw, "Type"); !slices.Equal(got, []string{"oneshot"}) {
		t.Errorf("%s: Type=%v, want oneshot (its dependents start once it has exited)", migrate, got)
	}
	if got := values(raw, "RemainAfterExit"); len(got) > 0 && !slices.Equal(got, []string{"no"}) {
		t.Errorf("%s: RemainAfterExit=%v: it would not run again for the next release", migrate, got)
	}
	if got := values(raw, "PartOf"); len(got) > 0 {
		t.Errorf("%s: PartOf=%v", migrate, got)
	}
	cred := regexp.MustCompile(`(?m)^LoadCredential=KERNODECK_DATABASE_URL:(\S+)$`).FindSubmatch(raw)
	if cred == nil {
		t.Fatalf("%s: no KERNODECK_DATABASE_URL credential", migrate)
	}
	if got := values(raw, "ConditionPathExists"); !slices.Equal(got, []string{string(cred[1])}) {
		t.Errorf("%s: ConditionPathExists=%v, want %s (it runs only on the machine holding the migrator's credential)", migrate, got, cred[1])
	}
	target, err := os.ReadFile("systemd/kernodeck.target")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"Wants", "Requires", "After"} {
		if slices.Contains(values(target, key), migrate) {
			t.Errorf("kernodeck.target: %s=%s", key, migrate)
		}
	}
}
