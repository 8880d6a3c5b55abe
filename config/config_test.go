package config

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.TemporalAddress != "127.0.0.1:7233" || !c.CookieSecure {
		t.Fatalf("defaults: %+v", c)
	}
	if len(c.ReminderOffsets) != 2 || c.ReminderOffsets[0] != 48*time.Hour || c.ReminderOffsets[1] != 6*time.Hour {
		t.Fatalf("reminders: %v", c.ReminderOffsets)
	}
	if len(c.SupportTokens) != 0 {
		t.Fatalf("support tokens must be empty by default: %v", c.SupportTokens)
	}
}

func TestWorkflowVersionBounds(t *testing.T) {
	for _, v := range []int{workflows.OldestStartVersion - 1, workflows.NewestVersion + 1, -1} {
		if _, err := FromEnv(env(map[string]string{"KERNODECK_WORKFLOW_VERSION": strconv.Itoa(v)})); err == nil {
			t.Errorf("KERNODECK_WORKFLOW_VERSION=%d accepted (this build: %d..%d)", v, workflows.OldestStartVersion, workflows.NewestVersion)
		}
	}
	for _, v := range []int{0, workflows.OldestStartVersion, workflows.NewestVersion} {
		c, err := FromEnv(env(map[string]string{"KERNODECK_WORKFLOW_VERSION": strconv.Itoa(v)}))
		if err != nil || c.WorkflowVersion != v {
			t.Errorf("KERNODECK_WORKFLOW_VERSION=%d: %d, %v", v, c.WorkflowVersion, err)
		}
	}
}

func TestParsesAndRejects(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"KERNODECK_REMINDER_OFFSETS": "24h, 1h30m",
		"KERNODECK_SUPPORT_TOKENS":   "alice:0123456789abcdefXYZ,bob:fedcba9876543210QQ",
		"KERNODECK_COOKIE_SECURE":    "false",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ReminderOffsets[1] != 90*time.Minute || c.CookieSecure || c.SupportTokens["0123456789abcdefXYZ"] != "alice" {
		t.Fatalf("parsed: %+v", c)
	}
	for k, v := range map[string]string{
		"KERNODECK_REMINDER_OFFSETS":      "48h,-1h",
		"KERNODECK_SUPPORT_TOKENS":        "alice:short",
		"KERNODECK_UNPAID_TIMEOUT":        "soon",
		"KERNODECK_PROVISIONING_ATTEMPTS": "0",
		"KERNODECK_ACCESS_PORT":           "x",
	} {
		if _, err := FromEnv(env(map[string]string{k: v})); err == nil {
			t.Errorf("%s=%q accepted", k, v)
		}
	}
}

// KERNODECK_WORKER_STOP_TIMEOUT: 2 minutes by default, a positive duration
// up to 30 minutes.
func TestWorkerStopTimeout(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil || c.WorkerStopTimeout != 2*time.Minute {
		t.Fatalf("default: %v, %v; want 2m", c.WorkerStopTimeout, err)
	}
	c, err = FromEnv(env(map[string]string{"KERNODECK_WORKER_STOP_TIMEOUT": "45s"}))
	if err != nil || c.WorkerStopTimeout != 45*time.Second {
		t.Fatalf("45s: %v, %v", c.WorkerStopTimeout, err)
	}
	for _, v := range []string{"0", "-1m", "soon", "31m"} {
		if _, err := FromEnv(env(map[string]string{"KERNODECK_WORKER_STOP_TIMEOUT": v})); err == nil {
			t.Errorf("KERNODECK_WORKER_STOP_TIMEOUT=%s accepted", v)
		}
	}
}

// KERNODECK_SUPPORT_ROLES: agent:role pairs, several roles joined by +,
// each agent once and one of KERNODECK_SUPPORT_TOKENS'; an agent not
// listed is an agent only. A wrong value stops the configuration with an
// error naming what is wrong.
func TestSupportRoles(t *testing.T) {
	const tokens = "alice:0123456789abcdefXYZ,bob:fedcba9876543210QQ,carol:carol-token-0123456789"
	c, err := FromEnv(env(map[string]string{"KERNODECK_SUPPORT_TOKENS": tokens,
		"KERNODECK_SUPPORT_ROLES": "alice:senior, bob:agent,carol:operator+senior"}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, rs := range c.SupportRoles {
		got[name] = rs.String()
	}
	want := map[string]string{"alice": "senior", "bob": "agent", "carol": "senior+operator"}
	if len(got) != len(want) || got["alice"] != want["alice"] || got["bob"] != want["bob"] || got["carol"] != want["carol"] {
		t.Fatalf("roles: %v, want %v", got, want)
	}
	if !c.SupportRoles["carol"].Has(domain.RoleOperator) || c.SupportRoles["bob"].Has(domain.RoleSenior) {
		t.Fatalf("roles held: %v", c.SupportRoles)
	}
	for v, wantErr := range map[string]string{
		"alice:admin":                 `unknown role "admin"`,
		"alice":                       "want agent:role",
		"alice:":                      "want agent:role",
		"alice:senior,alice:operator": `"alice" is listed twice`,
		"alice:senior+senior":         `role "senior" given twice`,
		"dave:senior":                 `agent "dave" has no token`,
	} {
		_, err := FromEnv(env(map[string]string{"KERNODECK_SUPPORT_TOKENS": tokens, "KERNODECK_SUPPORT_ROLES": v}))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "KERNODECK_SUPPORT_ROLES") {
			t.Errorf("KERNODECK_SUPPORT_ROLES=%q: %v, want an error with %q", v, err, wantErr)
		}
	}
}
