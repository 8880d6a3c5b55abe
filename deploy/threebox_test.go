package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The machines of scripts/prodlike.sh's KD_PRODLIKE_NETNS=1 mode
// (docs/three-machines.md) and the listeners each must have, by port
// offset from KD_PRODLIKE_PORT_BASE.
var threeMachines = []struct {
	name, addr string
	ports      map[int]string
}{
	{"data", "192.0.2.10", map[int]string{432: "PostgreSQL", 233: "Temporal frontend", 234: "Temporal history",
		235: "Temporal matching", 933: "Temporal membership", 900: "Temporal metrics"}},
	{"app", "192.0.2.11", map[int]string{80: "api", 91: "api operations", 93: "worker operations"}},
	{"chain", "192.0.2.12", map[int]string{443: "Litecoin RPC", 444: "Litecoin peer-to-peer", 95: "chainwatch operations"}},
}

// TestThreeMachines is issue 38's three-machine recipe, run: prodlike.sh
// with KD_PRODLIKE_NETNS=1 lays out three machines as network namespaces on
// a bridge (data 192.0.2.10: PostgreSQL and the Temporal server; app
// 192.0.2.11: api, worker, mail; chain 192.0.2.12: chainwatch and Litecoin
// Core) and an operator's (192.0.2.2), where this test's command runs. Each
// process binds its machine's address: every listener of every machine is
// on that address (none on 127.0.0.1, none on a wildcard), each Kernodeck
// process answers /readyz on its own address from the operator's machine,
// each kind is connected to PostgreSQL as its own role (docs/database.md),
// and `kdload burst` pays two orders in one Litecoin block through to
// active. The namespaces are gone afterwards. Root only (ip netns).
func TestThreeMachines(t *testing.T) {
	if testing.Short() {
		t.Skip("the three-machine deployment takes a minute or two")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: network namespaces (ip netns add) need root; run as root to check the three-machine recipe")
	}
	dir := prodlikeDir(t, "ip", "ss", "mailpit")
	const base = 27000 // each machine has its own ports: no clash with another run
	prefix := fmt.Sprintf("kdt%d", os.Getpid())
	// On the operator's machine: the listeners of each machine, the
	// readiness of each process on its address, then two orders paid.
	const command = `set -e
for m in data app chain; do echo "== $m"; ip netns exec "$KD_PRODLIKE_NETNS_PREFIX-$m" ss -ltnH; done
for kv in $KD_PRODLIKE_METRICS; do
	echo "readyz ${kv%%=*} http://${kv#*=}/readyz $(curl -s -o /dev/null -w '%{http_code}' "http://${kv#*=}/readyz")"
done
echo "database users: $(psql -qAt -d kd_prodlike -c "SELECT string_agg(DISTINCT usename, ' ' ORDER BY usename) FROM pg_stat_activity WHERE datname = 'kd_prodlike' AND usename <> 'postgres'")"
exec go run ./cmd/kdload burst -n 2 -c 1 -per-tx 2 -bare=false -detect 60s`
	cmd := exec.Command("scripts/prodlike.sh", "--", "bash", "-c", command)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(),
		"KD_PRODLIKE_NETNS=1", "KD_PRODLIKE_NETNS_PREFIX="+prefix,
		"KD_PRODLIKE_DIR="+dir, fmt.Sprintf("KD_PRODLIKE_PORT_BASE=%d", base))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("three machines: %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("prodlike.sh (KD_PRODLIKE_NETNS=1): %v\n%s", err, out)
	}
	if left, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(left), prefix+"-") {
		t.Errorf("namespaces left behind:\n%s", left)
	}

	// The listeners, machine by machine.
	sections := regexp.MustCompile(`(?m)^== (\w+)\n((?:LISTEN.*\n)*)`).FindAllSubmatch(out, -1)
	listeners := map[string][]string{}
	for _, s := range sections {
		for line := range strings.SplitSeq(strings.TrimSpace(string(s[2])), "\n") {
			if f := strings.Fields(line); len(f) >= 4 {
				listeners[string(s[1])] = append(listeners[string(s[1])], f[3])
			}
		}
	}
	for _, m := range threeMachines {
		got := listeners[m.name]
		if len(got) == 0 {
			t.Errorf("machine %s: no listeners listed", m.name)
			continue
		}
		for _, a := range got {
			host := a[:max(strings.LastIndex(a, ":"), 0)]
			if host != m.addr {
				t.Errorf("machine %s: a listener on %s, not on the machine's address %s (loopback or wildcard)", m.name, a, m.addr)
			}
		}
		for off, what := range m.ports {
			want := fmt.Sprintf("%s:%d", m.addr, base+off)
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+want+" ") {
				t.Errorf("machine %s: %s does not listen on %s (listeners: %v)", m.name, what, want, got)
			}
		}
	}

	// Readiness of each Kernodeck process, on its machine's address.
	for name, addr := range map[string]string{"api-1": "192.0.2.11:27091", "worker-1": "192.0.2.11:27093", "chainwatch-1": "192.0.2.12:27095"} {
		want := fmt.Sprintf("readyz %s http://%s/readyz 200", name, addr)
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("no %q in the output", want)
		}
	}

	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`database roles \(docs/database\.md\): kernodeck owns kd_prodlike \(migrate\)`),
		// Each kind logs in as its own role.
		regexp.MustCompile(`(?m)^database users: kernodeck_api kernodeck_chainwatch kernodeck_mail kernodeck_worker$`),
		regexp.MustCompile(`Temporal frontend on 192\.0\.2\.10:27233: mutual TLS`),
		regexp.MustCompile(`started mail \(pid \d+\)`),
		regexp.MustCompile(`broadcast -> payment_detected: 2 of 2`),
		regexp.MustCompile(`(?m)^block -> active: .* \(2 orders;`),
		regexp.MustCompile(`check: every order active`),
		regexp.MustCompile(`namespaces ` + prefix + `-hub .* deleted`),
	} {
		if !want.Match(out) {
			t.Errorf("no %q in the output", want)
		}
	}
	t.Logf("output (go test -v shows it):\n%s", out)
}

// prodlikeDir checks that the tools of scripts/prodlike.sh (and these
// more) are installed and returns a state directory for it: as root,
// prodlike runs its PostgreSQL server as the postgres user, which must
// reach it.
func prodlikeDir(t *testing.T, more ...string) string {
	t.Helper()
	for _, tool := range append([]string{"psql", "openssl", "temporal", "curl", "jq"}, more...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (scripts/ensure-tools.sh)", tool)
		}
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
