package domain

import (
	"strings"
	"time"
	"unicode/utf8"
)

// SessionClient is what a session and the account's activity record of the
// client: its User-Agent and its network address (no geolocation).
type SessionClient struct {
	UserAgent string
	IP        string
}

// MaxUserAgentLen bounds the User-Agent kept (longer ones are cut).
const MaxUserAgentLen = 512

// NewSessionClient keeps at most MaxUserAgentLen bytes of the User-Agent,
// cut on a character boundary, without control characters.
func NewSessionClient(userAgent, ip string) SessionClient {
	ua := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(userAgent, ""))
	for len(ua) > MaxUserAgentLen {
		_, size := utf8.DecodeLastRuneInString(ua)
		ua = ua[:len(ua)-size]
	}
	return SessionClient{UserAgent: ua, IP: ip}
}

// Session is one of an account's open sessions, as its owner sees it.
type Session struct {
	ID int64 `json:"id" db:"id"`
	// Current is the session the request came with.
	Current   bool   `json:"current" db:"current"`
	Device    string `json:"device" db:"-"`
	UserAgent string `json:"user_agent" db:"user_agent"`
	// ClientIP is the address the session was opened from.
	ClientIP  string    `json:"client_ip" db:"client_ip"`
	CreatedAt time.Time `json:"created_at" db:"created_at"`
	// LastUsedAt is recorded at most every few minutes (postgres.SessionTouchEvery).
	LastUsedAt time.Time `json:"last_used_at" db:"last_used_at"`
	ExpiresAt  time.Time `json:"expires_at" db:"expires_at"`
}

// Account activity kinds.
const (
	ActivityLogin           = "login"
	ActivityLoginFailed     = "login_failed" // before migration 00058; now a LoginFailures group
	ActivityPasswordChanged = "password_changed"
	ActivitySessionEnded    = "session_ended"  // one other session ended by the owner
	ActivitySessionsEnded   = "sessions_ended" // every other session ended by the owner
)

// AccountActivity is one entry of an account's own activity.
type AccountActivity struct {
	Kind      string    `json:"kind" db:"kind"`
	Device    string    `json:"device" db:"-"`
	UserAgent string    `json:"user_agent" db:"user_agent"`
	ClientIP  string    `json:"client_ip" db:"client_ip"`
	At        time.Time `json:"at" db:"at"`
}

// LoginFailures counts the wrong passwords given for an account's email
// from one client network on one day (UTC): kept apart from its activity,
// so that failures never push a login out of it.
type LoginFailures struct {
	Day     string `json:"day" db:"day"` // YYYY-MM-DD
	Network string `json:"network" db:"network"`
	Count   int    `json:"count" db:"failures"`
	// FirstAt and LastAt are the day's first and last failure from there;
	// Device and UserAgent the last one's client.
	FirstAt   time.Time `json:"first_at" db:"first_at"`
	LastAt    time.Time `json:"last_at" db:"last_at"`
	Device    string    `json:"device" db:"-"`
	UserAgent string    `json:"user_agent" db:"user_agent"`
}

// browsers and systems DeviceLabel recognises, most specific first (Edge
// and Opera say "Chrome" too, Chrome says "Safari").
var (
	uaBrowsers = []struct{ token, name string }{
		{"Edg/", "Edge"}, {"OPR/", "Opera"}, {"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"},
		{"CriOS/", "Chrome"}, {"Chrome/", "Chrome"}, {"Safari/", "Safari"},
		{"curl/", "curl"}, {"Go-http-client/", "client HTTP Go"}, {"python-requests/", "Python requests"},
	}
	uaSystems = []struct{ token, name string }{
		{"iPhone", "iPhone"}, {"iPad", "iPad"}, {"Android", "Android"}, {"CrOS", "ChromeOS"},
		{"Windows", "Windows"}, {"Mac OS X", "macOS"}, {"Macintosh", "macOS"}, {"Linux", "Linux"},
	}
)

// DeviceLabel names a client from its User-Agent for its owner: "Firefox
// sur Linux", "Safari sur iPhone"; "Appareil inconnu" when nothing is
// recognised. The raw User-Agent stays available beside it.
func DeviceLabel(userAgent string) string {
	browser, system := "", ""
	for _, b := range uaBrowsers {
		if strings.Contains(userAgent, b.token) {
			browser = b.name
			break
		}
	}
	for _, s := range uaSystems {
		if strings.Contains(userAgent, s.token) {
			system = s.name
			break
		}
	}
	switch {
	case browser != "" && system != "":
		return browser + " sur " + system
	case browser != "":
		return browser
	case system != "":
		return "Navigateur sur " + system
	default:
		return "Appareil inconnu"
	}
}
