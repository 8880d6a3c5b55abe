// Package config reads Kernodeck's configuration from environment variables,
// with safe local defaults. Every variable is listed in the README.
package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Config is the whole service configuration.
type Config struct {
	DatabaseURL       string            // KERNODECK_DATABASE_URL
	HTTPAddr          string            // KERNODECK_HTTP_ADDR
	TemporalAddress   string            // TEMPORAL_ADDRESS
	TemporalNamespace string            // TEMPORAL_NAMESPACE
	TemporalUIPort    int               // KERNODECK_TEMPORAL_UI_PORT (dev only)
	TemporalCLI       string            // KERNODECK_TEMPORAL_CLI (dev only)
	DevDataDir        string            // KERNODECK_DEV_DIR (dev only)
	CookieSecure      bool              // KERNODECK_COOKIE_SECURE
	SessionIdle       time.Duration     // KERNODECK_SESSION_IDLE: a session unused that long ends
	SupportTokens     map[string]string // KERNODECK_SUPPORT_TOKENS: token -> agent
	// SupportRoles (KERNODECK_SUPPORT_ROLES): each listed agent's roles
	// beyond agent ("alice:senior,carol:operator+senior"); an agent not
	// listed is an agent only.
	SupportRoles         map[string]domain.SupportRoles
	UnpaidTimeout        time.Duration   // KERNODECK_UNPAID_TIMEOUT
	TopUpTimeout         time.Duration   // KERNODECK_TOPUP_TIMEOUT
	ReminderOffsets      []time.Duration // KERNODECK_REMINDER_OFFSETS
	ProvisioningAttempts int32           // KERNODECK_PROVISIONING_ATTEMPTS
	AccessHost           string          // KERNODECK_ACCESS_HOST (local driver)
	AccessPort           int             // KERNODECK_ACCESS_PORT (local driver)
	StarterInterval      time.Duration   // KERNODECK_STARTER_INTERVAL
	WorkflowCacheSize    int             // KERNODECK_WORKFLOW_CACHE_SIZE
	WorkerStopTimeout    time.Duration   // KERNODECK_WORKER_STOP_TIMEOUT: a stopping worker's wait for its running activities
	WorkflowVersion      int             // KERNODECK_WORKFLOW_VERSION: caps new workflows' command version (0: the workers' newest)
	LogLevel             string          // KERNODECK_LOG_LEVEL
	TrustedProxies       []string        // KERNODECK_TRUSTED_PROXIES
	// TemporalAllowPlaintext accepts a Temporal frontend off this machine
	// without TLS (KERNODECK_TEMPORAL_ALLOW_PLAINTEXT); refused otherwise,
	// outside dev.
	TemporalAllowPlaintext bool
	StreamMaxAge           time.Duration // KERNODECK_STREAM_MAX_AGE: a live stream's longest life
	// FourEyesCents (KERNODECK_FOUR_EYES_CENTS): a support money action
	// above it waits for a second agent; AgentDailyCapCents
	// (KERNODECK_AGENT_DAILY_CAP_CENTS) caps what one agent's money
	// actions move in 24 hours.
	FourEyesCents      int64
	AgentDailyCapCents int64
}

// FromEnv reads the configuration; getenv is os.Getenv outside tests.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = Getenv
	}
	p := parser{getenv: getenv}
	var err error
	c := Config{
		DatabaseURL:          p.str("KERNODECK_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kernodeck?sslmode=disable"),
		HTTPAddr:             p.str("KERNODECK_HTTP_ADDR", "127.0.0.1:8080"),
		TemporalAddress:      p.str("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		TemporalNamespace:    p.str("TEMPORAL_NAMESPACE", "default"),
		TemporalUIPort:       p.int("KERNODECK_TEMPORAL_UI_PORT", 8233),
		TemporalCLI:          p.str("KERNODECK_TEMPORAL_CLI", ""),
		DevDataDir:           p.str("KERNODECK_DEV_DIR", ".dev"),
		CookieSecure:         p.bool("KERNODECK_COOKIE_SECURE", true),
		SessionIdle:          p.dur("KERNODECK_SESSION_IDLE", 7*24*time.Hour),
		SupportTokens:        p.tokens("KERNODECK_SUPPORT_TOKENS"),
		UnpaidTimeout:        p.dur("KERNODECK_UNPAID_TIMEOUT", workflows.DefaultUnpaidTimeout),
		TopUpTimeout:         p.dur("KERNODECK_TOPUP_TIMEOUT", workflows.DefaultTopUpTimeout),
		ReminderOffsets:      p.durs("KERNODECK_REMINDER_OFFSETS", workflows.DefaultReminderOffsets),
		ProvisioningAttempts: int32(p.int("KERNODECK_PROVISIONING_ATTEMPTS", workflows.DefaultProvisioningAttempts)),
		AccessHost:           p.str("KERNODECK_ACCESS_HOST", "127.0.0.1"),
		AccessPort:           p.int("KERNODECK_ACCESS_PORT", 22),
		StarterInterval:      p.dur("KERNODECK_STARTER_INTERVAL", 30*time.Second),
		WorkflowCacheSize:    p.int("KERNODECK_WORKFLOW_CACHE_SIZE", DefaultWorkflowCacheSize),
		WorkerStopTimeout:    p.dur("KERNODECK_WORKER_STOP_TIMEOUT", DefaultWorkerStopTimeout),
		WorkflowVersion:      p.int("KERNODECK_WORKFLOW_VERSION", 0),
		LogLevel:             p.str("KERNODECK_LOG_LEVEL", "info"),
		TrustedProxies:       p.list("KERNODECK_TRUSTED_PROXIES"),

		TemporalAllowPlaintext: p.bool("KERNODECK_TEMPORAL_ALLOW_PLAINTEXT", false),
		StreamMaxAge:           p.dur("KERNODECK_STREAM_MAX_AGE", 30*time.Minute),
		FourEyesCents:          int64(p.int("KERNODECK_FOUR_EYES_CENTS", domain.DefaultFourEyesCents)),
		AgentDailyCapCents:     int64(p.int("KERNODECK_AGENT_DAILY_CAP_CENTS", domain.DefaultAgentDailyCapCents)),
	}
	if p.err != nil {
		return Config{}, p.err
	}
	if c.SupportRoles, err = supportRoles(getenv("KERNODECK_SUPPORT_ROLES"), c.SupportTokens); err != nil {
		return Config{}, err
	}
	if err := checkURL("KERNODECK_DATABASE_URL", getenv("KERNODECK_DATABASE_URL"), true); err != nil {
		return Config{}, err
	}
	if v := c.WorkflowVersion; v != 0 && (v < workflows.OldestStartVersion || v > workflows.NewestVersion) {
		// Below the oldest, a new workflow would not check that its inputs
		// are addressed to it; above the newest, this build cannot run it.
		return Config{}, fmt.Errorf("KERNODECK_WORKFLOW_VERSION must be 0 or %d..%d (this build)",
			workflows.OldestStartVersion, workflows.NewestVersion)
	}
	if c.FourEyesCents < 1 || c.AgentDailyCapCents < c.FourEyesCents {
		// 0 would ask a second agent for every cent; a cap below the
		// threshold would refuse what approval is for.
		return Config{}, fmt.Errorf("KERNODECK_FOUR_EYES_CENTS must be at least 1 and KERNODECK_AGENT_DAILY_CAP_CENTS at least as much")
	}
	if c.WorkflowCacheSize < 1 {
		return Config{}, fmt.Errorf("KERNODECK_WORKFLOW_CACHE_SIZE must be at least 1")
	}
	if c.WorkerStopTimeout > MaxWorkerStopTimeout {
		return Config{}, fmt.Errorf("KERNODECK_WORKER_STOP_TIMEOUT must be at most %s (a stop that long holds a rollout)", MaxWorkerStopTimeout)
	}
	if c.ProvisioningAttempts < 1 {
		return Config{}, fmt.Errorf("KERNODECK_PROVISIONING_ATTEMPTS must be at least 1")
	}
	return c, nil
}

// supportRoles reads KERNODECK_SUPPORT_ROLES (domain.ParseSupportRoles),
// each agent named there being one of KERNODECK_SUPPORT_TOKENS' (when any
// is set: without tokens, dev makes its own agent): a misspelt name would
// leave a senior with an agent's rights, silently.
func supportRoles(v string, tokens map[string]string) (map[string]domain.SupportRoles, error) {
	roles, err := domain.ParseSupportRoles(v)
	if err != nil {
		return nil, fmt.Errorf("KERNODECK_SUPPORT_ROLES: %w", err)
	}
	if len(tokens) == 0 {
		return roles, nil
	}
	agents := map[string]bool{}
	for _, name := range tokens {
		agents[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(roles)) {
		if !agents[name] {
			return nil, fmt.Errorf("KERNODECK_SUPPORT_ROLES: agent %q has no token in KERNODECK_SUPPORT_TOKENS", name)
		}
	}
	return roles, nil
}

// DefaultWorkflowCacheSize bounds the workflows a worker keeps in memory
// (the SDK's default is 10,000): each cached rental costs about 0.09 MiB of
// RSS (BENCHMARKS.md); an evicted one is replayed from its history, about
// 115 events, at its next event (a reminder, the end, a support action).
const DefaultWorkflowCacheSize = 3000

// DefaultWorkerStopTimeout lets a stopping worker's activities finish: a
// machine step reports progress in its heartbeats (10 s timeout) and a
// step cut short is retried elsewhere, but one that completes is not redone.
// The worker unit's TimeoutStopSec (deploy/systemd) stays above it.
const DefaultWorkerStopTimeout = 2 * time.Minute

// MaxWorkerStopTimeout bounds KERNODECK_WORKER_STOP_TIMEOUT.
const MaxWorkerStopTimeout = 30 * time.Minute

// RentalConfig is the workflow configuration captured at each order's start.
func (c Config) RentalConfig() workflows.RentalConfig {
	return workflows.RentalConfig{
		UnpaidTimeout:        c.UnpaidTimeout,
		ReminderOffsets:      c.ReminderOffsets,
		ProvisioningAttempts: c.ProvisioningAttempts,
	}
}

// checkURL checks a URL that carries credentials without quoting it: a
// parse error would (url.Error holds the whole string, and its reason may
// quote a piece of the password). keyValue accepts lib/pq's "host=...
// password=..." form beside URLs. Empty is fine (a default applies).
func checkURL(key, v string, keyValue bool) error {
	if v == "" || (keyValue && !strings.Contains(v, "://")) {
		return nil
	}
	if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("%s: not a URL (want scheme://[user:password@]host[:port][/path], special characters of the password percent-encoded); its value is not shown", key)
	}
	return nil
}

type parser struct {
	getenv func(string) string
	err    error
}

func (p *parser) fail(key string, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: %w", key, err)
	}
}

func (p *parser) str(key, def string) string {
	if v := p.getenv(key); v != "" {
		return v
	}
	return def
}

func (p *parser) int(key string, def int) int {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.fail(key, err)
	}
	return n
}

func (p *parser) bool(key string, def bool) bool {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(key, err)
	}
	return b
}

func (p *parser) dur(key string, def time.Duration) time.Duration {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	if err != nil {
		p.fail(key, err)
	}
	return d
}

func (p *parser) durs(key string, def []time.Duration) []time.Duration {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	var out []time.Duration
	for _, s := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err == nil && d <= 0 {
			err = fmt.Errorf("must be positive")
		}
		if err != nil {
			p.fail(key, err)
			return def
		}
		out = append(out, d)
	}
	return out
}

// list parses a comma-separated list.
func (p *parser) list(key string) []string {
	var out []string
	for _, s := range strings.Split(p.getenv(key), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// tokens parses "agent:token,agent2:token2" into token -> agent.
func (p *parser) tokens(key string) map[string]string {
	out := map[string]string{}
	v := p.getenv(key)
	if v == "" {
		return out
	}
	for _, pair := range strings.Split(v, ",") {
		agent, token, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || agent == "" || len(token) < 16 {
			p.fail(key, fmt.Errorf("want agent:token pairs with tokens of 16+ characters"))
			return map[string]string{}
		}
		out[token] = agent
	}
	return out
}
