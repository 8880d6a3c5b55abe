package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/kernodeck/kernodeck/domain"
)

// A customer's second factor (issue 39, item 3): TOTP (RFC 6238, 6 digits,
// 30 s, SHA-1: what every authenticator app reads from a QR code) plus 10
// single-use recovery codes. The secret is generated here, sealed with the
// keyring (bound to the account) before it is stored, shown once during
// setup; recovery codes are shown once and stored as SHA-256 hashes. Every
// code checked counts under one throttle per account; a time step accepted
// once is never accepted again.

// TwoFactorStore keeps the second factor (postgres/totp.go). Optional
// (Deps.TwoFactor): without it no account has a second factor.
type TwoFactorStore interface {
	TwoFactor(ctx context.Context, accountID int64) (domain.TwoFactor, error)
	BeginTOTP(ctx context.Context, accountID int64, sealed string) error
	EnableTOTP(ctx context.Context, accountID, step int64, codeHashes [][]byte, now time.Time) error
	DisableTOTP(ctx context.Context, accountID int64, now time.Time) error
	UseTOTPStep(ctx context.Context, accountID, step int64) (bool, error)
	UseRecoveryCode(ctx context.Context, accountID int64, hash []byte) (bool, error)
	CreateLoginChallenge(ctx context.Context, tokenHash []byte, accountID int64, expires time.Time) error
	LoginChallenge(ctx context.Context, tokenHash []byte) (domain.Account, error)
	EndLoginChallenge(ctx context.Context, tokenHash []byte) (bool, error)
	RecordActivity(ctx context.Context, accountID int64, kind string, client domain.SessionClient) error
	Attempt(ctx context.Context, rules []domain.ThrottleRule) (retryAfter time.Duration, err error)
	Forgive(ctx context.Context, undo, reset []string) error
}

const (
	totpIssuer = "Kernodeck"
	totpPeriod = 30
	// totpSkew accepts the step before and after the current one (clocks
	// a little off).
	totpSkew = 1
	// recoveryCodes is how many recovery codes an activation gives.
	recoveryCodes = 10
	// loginChallengeTTL is how long the code step of a login may wait
	// after the password step.
	loginChallengeTTL = 5 * time.Minute
	// Wrong codes per account: codeLimit within codeWindow, then locked
	// codeWindow (doubled at each further lock, a day at most).
	codeLimit  = 5
	codeWindow = 15 * time.Minute
)

// totpOpts are the code parameters (the library's defaults, named).
var totpOpts = totp.ValidateOpts{Period: totpPeriod, Skew: 0, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// ECodeTOTPRequired answers a login whose password is right for an
// account with a second factor: the code is asked in a second call.
const ECodeTOTPRequired = "totp_required"

var (
	errTOTPRequired = &domain.Error{Code: ECodeTOTPRequired,
		Message: "Mot de passe correct. Saisissez maintenant le code à 6 chiffres de votre application d'authentification, ou un code de secours."}
	errCodeRequired = domain.FieldError("totp_code",
		"Saisissez le code à 6 chiffres de votre application d'authentification, ou un code de secours.")
	errCodeWrong = domain.FieldError("totp_code",
		"Code incorrect ou déjà utilisé. Saisissez le code affiché maintenant par votre application, ou un code de secours non utilisé.")
	errLoginChallenge = domain.Errorf(domain.ECodeUnauthorized,
		"Cette connexion a expiré ou n'est plus valide. Saisissez de nouveau votre email et votre mot de passe.")
	errTwoFactorOff = domain.Errorf(domain.ECodeConflict, "La double authentification n'est pas activée sur votre compte.")
	errNoSetup      = domain.Errorf(domain.ECodeNotFound,
		"Aucune activation de la double authentification n'est en cours : recommencez depuis votre compte.")
)

// TOTPRequired is Login's refusal when the password is right and the
// account has a second factor: LoginToken (short-lived, stored hashed)
// goes with the code to LoginWithCode, the only way it opens a session.
type TOTPRequired struct {
	LoginToken string
	ExpiresAt  time.Time
}

func (e *TOTPRequired) Error() string { return errTOTPRequired.Error() }
func (e *TOTPRequired) Unwrap() error { return errTOTPRequired }

// totpLabel is the associated data of an account's sealed secret.
func totpLabel(accountID int64) string {
	return "account_totp.secret:" + strconv.FormatInt(accountID, 10)
}

// secondStep is Login's last check: nil for an account without a second
// factor, else a pending login (*TOTPRequired).
func (s *Server) secondStep(ctx context.Context, acc domain.Account) error {
	if s.twoFactor == nil {
		return nil
	}
	tf, err := s.twoFactor.TwoFactor(ctx, acc.ID)
	if err != nil || !tf.Enabled {
		return err
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	expires := s.now().Add(loginChallengeTTL).UTC().Truncate(time.Second)
	if err := s.twoFactor.CreateLoginChallenge(ctx, tokenHash(token), acc.ID, expires); err != nil {
		return err
	}
	return &TOTPRequired{LoginToken: token, ExpiresAt: expires}
}

// LoginWithCode ends a login the password step left pending: the code (or
// a recovery code) checked under the account's code throttle, the pending
// login used once. The caller then opens the session (OpenSession).
func (s *Server) LoginWithCode(ctx context.Context, loginToken, code string, cl domain.SessionClient) (domain.Account, error) {
	if s.twoFactor == nil || strings.TrimSpace(loginToken) == "" {
		return domain.Account{}, errLoginChallenge
	}
	h := tokenHash(strings.TrimSpace(loginToken))
	acc, err := s.twoFactor.LoginChallenge(ctx, h)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		return domain.Account{}, errLoginChallenge
	}
	if err != nil {
		return domain.Account{}, err
	}
	if err := s.RequireSecondFactor(ctx, acc.ID, code); err != nil {
		return domain.Account{}, err
	}
	ended, err := s.twoFactor.EndLoginChallenge(ctx, h)
	if err != nil {
		return domain.Account{}, err
	}
	if !ended {
		return domain.Account{}, errLoginChallenge
	}
	if err := s.twoFactor.RecordActivity(ctx, acc.ID, domain.ActivityLogin, cl); err != nil {
		s.log.Warn("record account activity", "kind", domain.ActivityLogin, "err", err)
	}
	return acc, nil
}

// TwoFactorStatus is what the account page and GET /v1/me/2fa show.
type TwoFactorStatus struct {
	Available         bool `json:"available"`
	Enabled           bool `json:"enabled"`
	RecoveryCodesLeft int  `json:"recovery_codes_left"`
}

// TwoFactorStatus tells whether the caller's second factor is on.
func (s *Server) TwoFactorStatus(ctx context.Context, me *Customer) (TwoFactorStatus, error) {
	return s.twoFactorStatus(ctx, me.Account.ID)
}

func (s *Server) twoFactorStatus(ctx context.Context, accountID int64) (TwoFactorStatus, error) {
	if s.twoFactor == nil {
		return TwoFactorStatus{}, nil
	}
	tf, err := s.twoFactor.TwoFactor(ctx, accountID)
	return TwoFactorStatus{Available: true, Enabled: tf.Enabled, RecoveryCodesLeft: tf.RecoveryLeft}, err
}

// CustomerTwoFactor tells support whether a customer's second factor is
// on: never its secret nor its codes.
func (s *Server) CustomerTwoFactor(ctx context.Context, accountID int64) (bool, error) {
	st, err := s.twoFactorStatus(ctx, accountID)
	return st.Enabled, err
}

// TwoFactorSetup is a setup started: the secret, shown once as text and
// as a QR code (QRPath, the otpauth:// URL as a PNG on the same origin).
type TwoFactorSetup struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpauth_url"`
	QRPath     string `json:"qr_path"`
}

// BeginTwoFactor generates a new secret for the caller (replacing a setup
// not confirmed); 2FA stays off until ConfirmTwoFactor.
func (s *Server) BeginTwoFactor(ctx context.Context, me *Customer) (TwoFactorSetup, error) {
	if s.twoFactor == nil {
		return TwoFactorSetup{}, errTwoFactorUnavailable
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: totpIssuer, AccountName: me.Account.Email,
		Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return TwoFactorSetup{}, fmt.Errorf("generate TOTP secret: %w", err)
	}
	sealed := s.links.Keyring.Seal(key.Secret(), totpLabel(me.Account.ID))
	if err := s.twoFactor.BeginTOTP(ctx, me.Account.ID, sealed); err != nil {
		return TwoFactorSetup{}, err
	}
	return TwoFactorSetup{Secret: key.Secret(), OTPAuthURL: key.URL(), QRPath: "/v1/me/2fa/qr.png"}, nil
}

var errTwoFactorUnavailable = domain.Errorf(domain.ECodeUnavailable, "La double authentification n'est pas disponible pour le moment.")

// TwoFactorQR is the pending setup's otpauth:// URL as a PNG QR code; not
// found once the setup is confirmed (the secret is never shown again).
func (s *Server) TwoFactorQR(ctx context.Context, me *Customer) ([]byte, error) {
	secret, err := s.pendingSecret(ctx, me)
	if err != nil {
		return nil, err
	}
	return qrcode.Encode(otpauthURL(me.Account.Email, secret), qrcode.Medium, 280)
}

// PendingTwoFactor is the pending setup again (a page reloaded before the
// code was confirmed): not found once confirmed or never started.
func (s *Server) PendingTwoFactor(ctx context.Context, me *Customer) (TwoFactorSetup, error) {
	secret, err := s.pendingSecret(ctx, me)
	if err != nil {
		return TwoFactorSetup{}, err
	}
	return TwoFactorSetup{Secret: secret, OTPAuthURL: otpauthURL(me.Account.Email, secret), QRPath: "/v1/me/2fa/qr.png"}, nil
}

// otpauthURL is the otpauth:// URL an authenticator app reads from the QR
// code ("" if secret is not base32: never for a secret made here).
func otpauthURL(email, secret string) string {
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil || len(raw) == 0 {
		return ""
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: totpIssuer, AccountName: email, Period: totpPeriod,
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, Secret: raw})
	if err != nil {
		return ""
	}
	return key.URL()
}

func (s *Server) pendingSecret(ctx context.Context, me *Customer) (string, error) {
	if s.twoFactor == nil {
		return "", errNoSetup
	}
	tf, err := s.twoFactor.TwoFactor(ctx, me.Account.ID)
	if err != nil {
		return "", err
	}
	if !tf.Pending {
		return "", errNoSetup
	}
	return s.links.Keyring.Open(tf.SecretSealed, totpLabel(me.Account.ID))
}

// ConfirmTwoFactor turns the caller's pending setup on with a first code,
// under the code throttle, and returns the 10 recovery codes (shown once;
// only their hashes are kept). The mail saying 2FA is on is queued.
func (s *Server) ConfirmTwoFactor(ctx context.Context, me *Customer, code string) ([]string, error) {
	secret, err := s.pendingSecret(ctx, me)
	if err != nil {
		return nil, err
	}
	rule := s.codeRule(me.Account.ID)
	if err := s.codeAttempt(ctx, rule); err != nil {
		return nil, err
	}
	step, ok := matchStep(secret, normalizeCode(code), s.now())
	if !ok {
		return nil, errCodeWrong
	}
	codes, hashes, err := newRecoveryCodes()
	if err != nil {
		return nil, err
	}
	if err := s.twoFactor.EnableTOTP(ctx, me.Account.ID, step, hashes, s.now()); err != nil {
		return nil, err
	}
	s.forgiveCodes(ctx, rule)
	return codes, nil
}

// DisableTwoFactor turns the caller's second factor off, a code (or a
// recovery code) given; the mail saying so is queued.
func (s *Server) DisableTwoFactor(ctx context.Context, me *Customer, code string) error {
	st, err := s.twoFactorStatus(ctx, me.Account.ID)
	if err != nil {
		return err
	}
	if !st.Enabled {
		return errTwoFactorOff
	}
	if err := s.RequireSecondFactor(ctx, me.Account.ID, code); err != nil {
		return err
	}
	return s.twoFactor.DisableTOTP(ctx, me.Account.ID, s.now())
}

// RequireSecondFactor checks code for an action that needs it (login's
// second step, turning 2FA off, changing the password, asking for a
// payout): nil when the account has no second factor; else the code must
// be the current TOTP code, not used before, or an unused recovery code
// (used up by this call). Every attempt counts under the account's code
// throttle (a right code resets it).
func (s *Server) RequireSecondFactor(ctx context.Context, accountID int64, code string) error {
	if s.twoFactor == nil {
		return nil
	}
	tf, err := s.twoFactor.TwoFactor(ctx, accountID)
	if err != nil || !tf.Enabled {
		return err
	}
	code = normalizeCode(code)
	if code == "" {
		return errCodeRequired
	}
	rule := s.codeRule(accountID)
	if err := s.codeAttempt(ctx, rule); err != nil {
		return err
	}
	if len(code) == int(otp.DigitsSix) && isDigits(code) {
		secret, err := s.links.Keyring.Open(tf.SecretSealed, totpLabel(accountID))
		if err != nil {
			return fmt.Errorf("open TOTP secret of account %d: %w", accountID, err)
		}
		step, ok := matchStep(secret, code, s.now())
		if !ok {
			return errCodeWrong
		}
		if fresh, err := s.twoFactor.UseTOTPStep(ctx, accountID, step); err != nil || !fresh {
			return cmpErr(err, errCodeWrong) // replayed: refused, and counted
		}
	} else {
		used, err := s.twoFactor.UseRecoveryCode(ctx, accountID, recoveryHash(code))
		if err != nil || !used {
			return cmpErr(err, errCodeWrong)
		}
	}
	s.forgiveCodes(ctx, rule)
	return nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func (s *Server) codeRule(accountID int64) domain.ThrottleRule {
	return domain.ThrottleRule{Key: "totp:account:" + strconv.FormatInt(accountID, 10),
		Limit: codeLimit, Window: codeWindow, Lockout: codeWindow, MaxLockout: 24 * time.Hour}
}

func (s *Server) codeAttempt(ctx context.Context, rule domain.ThrottleRule) error {
	retry, err := s.twoFactor.Attempt(ctx, []domain.ThrottleRule{rule})
	if err != nil {
		return err
	}
	if retry > 0 {
		return errTooMany(retry, "Trop de codes de double authentification incorrects.")
	}
	return nil
}

func (s *Server) forgiveCodes(ctx context.Context, rule domain.ThrottleRule) {
	if err := s.twoFactor.Forgive(ctx, nil, []string{rule.Key}); err != nil {
		s.log.Warn("forgive code attempts", "err", err)
	}
}

// matchStep finds the time step (within totpSkew of now) whose code is
// code, comparing in constant time.
func matchStep(secret, code string, now time.Time) (int64, bool) {
	cur := now.Unix() / totpPeriod
	for d := int64(-totpSkew); d <= totpSkew; d++ {
		step := cur + d
		want, err := totp.GenerateCodeCustom(secret, time.Unix(step*totpPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if len(code) == len(want) && subtle.ConstantTimeCompare([]byte(code), []byte(want)) == 1 {
			return step, true
		}
	}
	return 0, false
}

// normalizeCode drops the spaces and dashes people type or copy.
func normalizeCode(code string) string {
	return strings.ToLower(strings.NewReplacer(" ", "", "-", "", "\t", "").Replace(strings.TrimSpace(code)))
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// recoveryAlphabet: lowercase base32 without padding (no 0/1/8/9 to
// confuse with letters), 10 characters = 50 bits per code.
var recoveryAlphabet = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newRecoveryCodes makes the recovery codes shown ("xxxxx-xxxxx") and
// their hashes (kept).
func newRecoveryCodes() ([]string, [][]byte, error) {
	codes := make([]string, 0, recoveryCodes)
	hashes := make([][]byte, 0, recoveryCodes)
	for range recoveryCodes {
		var b [7]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, fmt.Errorf("random recovery code: %w", err)
		}
		c := recoveryAlphabet.EncodeToString(b[:])[:10]
		codes = append(codes, c[:5]+"-"+c[5:])
		hashes = append(hashes, recoveryHash(c))
	}
	return codes, hashes, nil
}

// recoveryHash is what the store keeps of a recovery code (normalized).
func recoveryHash(code string) []byte {
	h := sha256.Sum256([]byte("kernodeck-recovery:" + normalizeCode(code)))
	return h[:]
}

// asTOTPRequired is err's pending login, if it is one.
func asTOTPRequired(err error) (*TOTPRequired, bool) {
	var tr *TOTPRequired
	ok := errors.As(err, &tr)
	return tr, ok
}
