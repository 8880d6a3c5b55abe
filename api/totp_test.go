package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/postgres"
)

// testClock is a clock the test moves (the TOTP time step).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) step()          { c.mu.Lock(); c.t = c.t.Add(30 * time.Second); c.mu.Unlock() }

func totpHarness(t *testing.T) (*harness, *testClock) {
	clock := &testClock{t: time.Now().UTC()}
	h := newDBHarness(t, func(db *postgres.DB, _ *api.Config, d *api.Deps) {
		d.TwoFactor, d.Now = db, clock.now
	})
	return h, clock
}

func codeAt(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	require.NoError(t, err)
	return code
}

// enable2FA sets up and confirms 2FA for c; it returns the secret and the
// recovery codes.
func enable2FA(t *testing.T, h *harness, clock *testClock, c customer) (string, []string) {
	t.Helper()
	r := h.do("POST", "/v1/me/2fa/setup", nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	secret, _ := r.body["secret"].(string)
	require.NotEmpty(t, secret)
	require.Contains(t, r.body["otpauth_url"], "otpauth://totp/Kernodeck")
	require.Contains(t, r.body["otpauth_url"], "secret="+secret)
	r = h.do("POST", "/v1/me/2fa/confirm", map[string]any{"code": codeAt(t, secret, clock.now())}, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	var codes []string
	for _, v := range r.body["recovery_codes"].([]any) {
		codes = append(codes, v.(string))
	}
	require.Len(t, codes, 10)
	return secret, codes
}

func (h *harness) mails(accountID int64, template string) int {
	h.t.Helper()
	var n int
	require.NoError(h.t, h.db.Get(&n, `SELECT count(*) FROM mail_outbox WHERE account_id = $1 AND template = $2`, accountID, template))
	return n
}

func loginStep(t *testing.T, h *harness, email string) string {
	t.Helper()
	r := h.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": testPassword, "bearer": true}, auth{})
	require.Equal(t, http.StatusUnauthorized, r.Code, r.Body.String())
	require.Equal(t, "totp_required", r.errCode())
	require.Contains(t, r.obj("error")["message"], "code à 6 chiffres")
	require.Nil(t, r.body["token"], "the password step opens no session")
	require.Nil(t, sessionCookie(r.ResponseRecorder))
	token, _ := r.body["login_token"].(string)
	require.NotEmpty(t, token)
	return token
}

func codeStep(h *harness, token, code string) resp {
	return h.do("POST", "/v1/auth/login/totp", map[string]any{"login_token": token, "code": code, "bearer": true}, auth{})
}

func TestTOTPEnableLoginRecoveryDisable(t *testing.T) {
	h, clock := totpHarness(t)
	c := h.register("totp@example.com")

	// A setup abandoned leaves 2FA off; the QR code is served as a PNG.
	r := h.do("POST", "/v1/me/2fa/setup", nil, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	abandoned := r.body["secret"].(string)
	qr := h.do("GET", "/v1/me/2fa/qr.png", nil, c.auth)
	require.Equal(t, http.StatusOK, qr.Code)
	require.Equal(t, "image/png", qr.Header().Get("Content-Type"))
	require.Equal(t, false, h.do("GET", "/v1/me/2fa", nil, c.auth).body["enabled"])
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": c.email, "password": testPassword, "bearer": true}, auth{})
	require.Equal(t, http.StatusOK, r.Code, "2FA off: the password is enough")

	// Confirming needs a right code; the secret is stored sealed.
	r = h.do("POST", "/v1/me/2fa/confirm", map[string]any{"code": "000000"}, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
	require.Equal(t, "totp_code", r.errField())
	secret, recovery := enable2FA(t, h, clock, c)
	require.NotEqual(t, abandoned, secret)
	var sealed string
	require.NoError(t, h.db.Get(&sealed, `SELECT secret_sealed FROM account_totp WHERE account_id = $1`, c.id))
	require.NotContains(t, sealed, secret)
	require.Equal(t, true, h.do("GET", "/v1/me/2fa", nil, c.auth).body["enabled"])
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/me/2fa/qr.png", nil, c.auth).Code, "the secret is never shown again")
	require.Equal(t, 1, h.mails(c.id, postgres.MailTOTPEnabled))
	var hashes int
	require.NoError(t, h.db.Get(&hashes, `SELECT count(*) FROM account_recovery_codes WHERE account_id = $1 AND code_hash = sha256(convert_to($2, 'UTF8'))`,
		c.id, recovery[0]))
	require.Zero(t, hashes)

	// Login: the password step, then the code. The code confirmed at setup
	// (same time step) is not accepted again.
	token := loginStep(t, h, c.email)
	r = codeStep(h, token, codeAt(t, secret, clock.now()))
	require.Equal(t, http.StatusBadRequest, r.Code, "a code's step is used once: %s", r.Body.String())
	clock.step()
	code := codeAt(t, secret, clock.now())
	r = codeStep(h, token, code)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.NotEmpty(t, r.body["token"])
	// The pending login is used up, and the code is not accepted twice.
	require.Equal(t, http.StatusUnauthorized, codeStep(h, token, code).Code)
	r = codeStep(h, loginStep(t, h, c.email), code)
	require.Equal(t, http.StatusBadRequest, r.Code, "replay: %s", r.Body.String())
	require.Equal(t, "totp_code", r.errField())

	// A recovery code opens one session, once.
	r = codeStep(h, loginStep(t, h, c.email), strings.ToUpper(recovery[3]))
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	r = codeStep(h, loginStep(t, h, c.email), recovery[3])
	require.Equal(t, http.StatusBadRequest, r.Code, "a recovery code is used once: %s", r.Body.String())
	require.Equal(t, float64(9), h.do("GET", "/v1/me/2fa", nil, c.auth).body["recovery_codes_left"])

	// Changing the password needs the code.
	r = h.do("POST", "/v1/me/password", map[string]any{"current_password": testPassword, "new_password": "another long password 1"}, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
	require.Equal(t, "totp_code", r.errField())
	clock.step()
	r = h.do("POST", "/v1/me/password", map[string]any{"current_password": testPassword, "new_password": "another long password 1",
		"totp_code": codeAt(t, secret, clock.now())}, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())

	// Support sees that 2FA is on, never the secret.
	r = h.do("GET", fmt.Sprintf("/v1/support/accounts/%d", c.id), nil, auth{bearer: agentToken})
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, true, r.body["two_factor"])
	require.NotContains(t, r.Body.String(), secret)
	require.NotContains(t, r.Body.String(), sealed)

	// Turning it off needs the code; a mail says so.
	r = h.do("POST", "/v1/me/2fa/disable", map[string]any{"code": ""}, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
	r = h.do("POST", "/v1/me/2fa/disable", map[string]any{"code": "123456"}, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
	require.Equal(t, true, h.do("GET", "/v1/me/2fa", nil, c.auth).body["enabled"])
	clock.step()
	r = h.do("POST", "/v1/me/2fa/disable", map[string]any{"code": codeAt(t, secret, clock.now())}, c.auth)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, 1, h.mails(c.id, postgres.MailTOTPDisabled))
	require.Equal(t, false, h.do("GET", fmt.Sprintf("/v1/support/accounts/%d", c.id), nil, auth{bearer: agentToken}).body["two_factor"])
	r = h.do("POST", "/v1/auth/login", map[string]any{"email": c.email, "password": "another long password 1", "bearer": true}, auth{})
	require.Equal(t, http.StatusOK, r.Code, "2FA off again: the password is enough")
}

func TestTOTPWrongCodesThrottled(t *testing.T) {
	h, clock := totpHarness(t)
	c := h.register("totp-throttle@example.com")
	secret, recovery := enable2FA(t, h, clock, c)
	clock.step()
	token := loginStep(t, h, c.email)
	for i := range 5 {
		r := codeStep(h, token, fmt.Sprintf("%06d", i))
		require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
	}
	r := codeStep(h, token, "999999")
	require.Equal(t, http.StatusTooManyRequests, r.Code, r.Body.String())
	require.Equal(t, "too_many_attempts", r.errCode())
	require.NotEmpty(t, r.Header().Get("Retry-After"))
	// Locked: even the right code, or a recovery code, waits.
	require.Equal(t, http.StatusTooManyRequests, codeStep(h, token, codeAt(t, secret, clock.now())).Code)
	require.Equal(t, http.StatusTooManyRequests, codeStep(h, token, recovery[0]).Code)
	// The password change and turning 2FA off share the lock.
	r = h.do("POST", "/v1/me/2fa/disable", map[string]any{"code": codeAt(t, secret, clock.now())}, c.auth)
	require.Equal(t, http.StatusTooManyRequests, r.Code, r.Body.String())
}
