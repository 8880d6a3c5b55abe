// Package redact keeps the credentials of configured endpoints (node URLs
// carrying API keys in their path or query, user:password in their
// authority, database URLs) out of logs and error output: node providers
// put the API key in the URL, and HTTP client errors quote the URL.
package redact

import (
	"io"
	"net/url"
	"strings"
	"sync"
	"unicode"
)

// Mask replaces every secret.
const Mask = "REDACTED"

// minSecret is the shortest secret replaced: shorter ones ("rpc", "1")
// would mask ordinary words.
const minSecret = 6

// URL returns raw with its credentials masked: user and password, every
// query value and every path segment that looks like a key. An unparsable
// value is masked whole.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Mask
	}
	if u.User != nil {
		u.User = url.User(Mask)
	}
	q := u.Query()
	for k := range q {
		q[k] = []string{Mask}
	}
	u.RawQuery = q.Encode()
	segs := strings.Split(u.Path, "/")
	for i, s := range segs {
		if keyLike(s) {
			segs[i] = Mask
		}
	}
	u.Path, u.RawPath = strings.Join(segs, "/"), ""
	return u.String()
}

// keyLike: a path segment of 16 or more letters, digits, '-' or '_', with
// both letters and digits (Infura's /v3/<32 hex>, Alchemy's /v2/<key>,
// QuickNode's /<token>/), not a word like "getnowblock".
func keyLike(s string) bool {
	if len(s) < 16 {
		return false
	}
	letters, digits := false, false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) && r < unicode.MaxASCII:
			letters = true
		case unicode.IsDigit(r):
			digits = true
		case r == '-' || r == '_':
		default:
			return false
		}
	}
	return letters && digits
}

// Secrets are the parts of raw to mask wherever they appear: user,
// password, query values and key-like path segments, as written and
// escaped. Not a URL: nothing.
func Secrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil
	}
	var out []string
	if u.User != nil {
		out = append(out, u.User.Username())
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	for _, s := range strings.Split(u.Path, "/") {
		if keyLike(s) {
			out = append(out, s)
		}
	}
	var all []string
	for _, s := range out {
		if len(s) >= minSecret {
			all = append(all, s, url.QueryEscape(s), url.PathEscape(s))
		}
	}
	return all
}

// Redactor masks a fixed set of secrets.
type Redactor struct {
	r *strings.Replacer
}

// New returns a Redactor for the secrets of urls (see Secrets) and for
// plain secrets given as they are (passwords of other services).
func New(urls []string, plain ...string) *Redactor {
	seen := map[string]bool{}
	var pairs []string
	add := func(s string) {
		if len(s) >= minSecret && !seen[s] {
			seen[s] = true
			pairs = append(pairs, s, Mask)
		}
	}
	for _, u := range urls {
		for _, s := range Secrets(u) {
			add(s)
		}
	}
	for _, s := range plain {
		add(s)
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// String masks every secret in s.
func (r *Redactor) String(s string) string { return r.r.Replace(s) }

// Writer masks every secret in what is written to w. Each Write is masked
// on its own: log handlers write one whole record per call.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{w: w, r: r} }

type writer struct {
	mu sync.Mutex
	w  io.Writer
	r  *Redactor
}

func (w *writer) Write(p []byte) (int, error) {
	out := w.r.String(string(p))
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write([]byte(out)); err != nil {
		return 0, err
	}
	return len(p), nil
}
