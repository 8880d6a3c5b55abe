package api

import (
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/workflows"
)

// Defaults for the zero fields of Config.
const (
	DefaultSessionTTL          = 30 * 24 * time.Hour
	DefaultSessionIdle         = 7 * 24 * time.Hour
	DefaultMaxBodyBytes        = 64 << 10
	DefaultLoginWindow         = 15 * time.Minute
	DefaultMaxFailuresPerEmail = 5
	DefaultMaxFailuresPerIP    = 20
	DefaultLoginSlowAfter      = 10
	DefaultLoginDelayBase      = 500 * time.Millisecond
	DefaultLoginDelayMax       = 10 * time.Second
	DefaultVerifyResendEvery   = 5 * time.Minute
	DefaultVerifyResendPerDay  = 5
	DefaultLoginLockout        = 15 * time.Minute
	DefaultRegistrationsPerIP  = 10
	DefaultRegistrationWindow  = time.Hour
	DefaultSSEPoll             = 5 * time.Second
	DefaultSSEHeartbeat        = 15 * time.Second
	DefaultSSESessionCheck     = 10 * time.Second
	DefaultSSEMaxAge           = 30 * time.Minute
	DefaultWorkflowTimeout     = 30 * time.Second
)

// Config is the API's configuration. Zero fields take the defaults above.
type Config struct {
	// CookieSecure sets the Secure flag of the session cookie. Keep it on
	// in production; turn it off only for local plain-http development.
	CookieSecure bool
	// SessionTTL is a session's lifetime (30 days).
	SessionTTL time.Duration
	// SessionIdle ends a session unused that long (7 days); its last use
	// is recorded at most every postgres.SessionTouchEvery (5 minutes).
	SessionIdle time.Duration
	// AgentTokens maps each support agent's bearer token to the agent's
	// name, recorded in the audit log. Tokens shorter than 16 characters
	// are ignored (and logged).
	AgentTokens map[string]string
	// AgentRoles are the agents' roles beyond agent (senior, operator),
	// by name; an agent not in it is an agent only (support_roles.go).
	AgentRoles map[string]domain.SupportRoles
	// TrustedProxies are the proxies whose X-Forwarded-For is believed for
	// the client IP (login throttling). Empty: none, the peer address is used.
	TrustedProxies []string
	// MaxBodyBytes limits request bodies (64 KiB).
	MaxBodyBytes int64
	// Login throttling, decided atomically in PostgreSQL before the password
	// is checked. Within LoginWindow (15 min): MaxFailuresPerEmail (5)
	// failures for one email from one network (IPv4 address, IPv6 /56),
	// MaxFailuresPerIP (20) from one network whatever the email, and
	// Past a limit: 429 for LoginLockout (15 min), doubled at each further
	// lock up to a day. The account itself is never locked (its owner must
	// get in whatever others try): past LoginSlowAfter (10) failures for one
	// email from one network within LoginWindow, every login for that email
	// from that network waits LoginDelayBase (0.5 s), doubled at each
	// further failure up to LoginDelayMax (10 s), before its password is
	// checked. Failures from other networks never slow the owner.
	LoginWindow         time.Duration
	MaxFailuresPerEmail int
	MaxFailuresPerIP    int
	LoginLockout        time.Duration
	LoginSlowAfter      int
	LoginDelayBase      time.Duration
	LoginDelayMax       time.Duration
	// An unconfirmed account may have its confirmation mail sent again
	// once per VerifyResendEvery (5 min), VerifyResendPerDay times (5) per
	// 24 hours, the registration's mail included.
	VerifyResendEvery  time.Duration
	VerifyResendPerDay int
	// RegistrationsPerIP accounts may be created from one network per
	// RegistrationWindow (10 per hour).
	RegistrationsPerIP int
	RegistrationWindow time.Duration
	// Quotas bound what an account creates or opens (quotas.go).
	Quotas Quotas
	// SupportLimits bound what one agent moves alone: money actions above
	// FourEyesCents (100 USD) wait for a second agent, and an agent's
	// money actions of the last 24 hours never pass AgentDailyCapCents
	// (5,000 USD) (four_eyes.go).
	SupportLimits domain.SupportLimits
	// AllowedOrigins are browser origins, besides the API's own host, whose
	// state-changing requests are accepted (a request with any other Origin
	// header is refused: cross-site request forgery).
	AllowedOrigins []string
	// Argon2 are the password hashing parameters (zero: OWASP's 19 MiB,
	// 2 passes, 1 lane).
	Argon2 Argon2Params
	// Rental is captured into every new rental workflow's input.
	Rental workflows.RentalConfig
	// TopUpTimeout expires an unpaid top-up (0: the workflow's default).
	TopUpTimeout time.Duration
	// Confirmations is the confirmation policy per network, shown with the
	// payments seen for a payment request ("2 of 6").
	Confirmations map[string]int64
	// SSEPoll is the order stream's fallback poll interval (5 s) and
	// SSEHeartbeat its keep-alive comment interval (15 s).
	SSEPoll      time.Duration
	SSEHeartbeat time.Duration
	// SSESessionCheck is how often a live stream reads its session again
	// (10 s): it ends once the session is gone (logout, expiry). SSEMaxAge
	// ends every stream after at most that long (30 min, less up to a
	// tenth so that streams opened together do not all reconnect at once);
	// EventSource reconnects by itself with Last-Event-ID, through the
	// session check of a new request.
	SSESessionCheck time.Duration
	SSEMaxAge       time.Duration
	// WorkflowTimeout bounds each call to the Workflows (30 s).
	WorkflowTimeout time.Duration
	// ExportMaxRows bounds a support export (DefaultExportMaxRows): a
	// filter matching more is refused before anything is written.
	ExportMaxRows int
	// CasePageSize is a page of the support list (DefaultCasePageSize).
	CasePageSize int
}

func (c *Config) setDefaults() {
	c.SupportLimits = c.SupportLimits.WithDefaults()
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.LoginWindow <= 0 {
		c.LoginWindow = DefaultLoginWindow
	}
	if c.MaxFailuresPerEmail <= 0 {
		c.MaxFailuresPerEmail = DefaultMaxFailuresPerEmail
	}
	if c.MaxFailuresPerIP <= 0 {
		c.MaxFailuresPerIP = DefaultMaxFailuresPerIP
	}
	if c.LoginSlowAfter <= 0 {
		c.LoginSlowAfter = DefaultLoginSlowAfter
	}
	if c.LoginDelayBase <= 0 {
		c.LoginDelayBase = DefaultLoginDelayBase
	}
	if c.LoginDelayMax <= 0 {
		c.LoginDelayMax = DefaultLoginDelayMax
	}
	if c.VerifyResendEvery <= 0 {
		c.VerifyResendEvery = DefaultVerifyResendEvery
	}
	if c.VerifyResendPerDay <= 0 {
		c.VerifyResendPerDay = DefaultVerifyResendPerDay
	}
	if c.LoginLockout <= 0 {
		c.LoginLockout = DefaultLoginLockout
	}
	if c.RegistrationsPerIP <= 0 {
		c.RegistrationsPerIP = DefaultRegistrationsPerIP
	}
	if c.RegistrationWindow <= 0 {
		c.RegistrationWindow = DefaultRegistrationWindow
	}
	c.Quotas.setDefaults()
	if c.Argon2 == (Argon2Params{}) {
		c.Argon2 = defaultArgon2()
	}
	if c.SSEPoll <= 0 {
		c.SSEPoll = DefaultSSEPoll
	}
	if c.SSEHeartbeat <= 0 {
		c.SSEHeartbeat = DefaultSSEHeartbeat
	}
	if c.SSESessionCheck <= 0 {
		c.SSESessionCheck = DefaultSSESessionCheck
	}
	if c.SSEMaxAge <= 0 {
		c.SSEMaxAge = DefaultSSEMaxAge
	}
	if c.WorkflowTimeout <= 0 {
		c.WorkflowTimeout = DefaultWorkflowTimeout
	}
	if c.CasePageSize <= 0 || c.CasePageSize >= domain.CaseListMaxPage { // one more is read
		c.CasePageSize = DefaultCasePageSize
	}
	if c.ExportMaxRows <= 0 {
		c.ExportMaxRows = DefaultExportMaxRows
	}
}
