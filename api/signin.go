package api

// Signing customers in and out: registration, login (with its throttle
// and slow-down), logout and the address's confirmation.

import (
	"context"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/mailverify"
)

type registerRequest struct {
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Email     string `json:"email"`
	Password  string `json:"password"`
	Bearer    bool   `json:"bearer"`
}

func validEmail(e string) bool {
	if len(e) < 3 || len(e) > 254 || strings.ContainsAny(e, " \t\r\n<>\"") {
		return false
	}
	addr, err := mail.ParseAddress(e)
	if err != nil || addr.Address != e {
		return false
	}
	at := strings.LastIndexByte(e, '@')
	return at > 0 && at < len(e)-1
}

func (s *Server) register(c *gin.Context) {
	var req registerRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	acc, err := s.Register(c.Request.Context(), RegisterInput{FirstName: req.FirstName, LastName: req.LastName,
		Email: req.Email, Password: req.Password}, client(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	resp, err := s.startSession(c, acc, req.Bearer)
	s.answer(c, http.StatusCreated, resp, err)
}

// RegisterInput is a new customer's name, email and password.
type RegisterInput struct {
	FirstName, LastName, Email, Password string
}

// Register creates a customer's account, address unconfirmed, its
// confirmation mail queued; registrations are limited per client network.
func (s *Server) Register(ctx context.Context, req RegisterInput, cl domain.SessionClient) (domain.Account, error) {
	first, err := personName("first_name", req.FirstName, 100, "Indiquez votre prénom (100 caractères au plus).")
	if err != nil {
		return domain.Account{}, err
	}
	last, err := personName("last_name", req.LastName, 100, "Indiquez votre nom (100 caractères au plus).")
	if err != nil {
		return domain.Account{}, err
	}
	email := strings.TrimSpace(req.Email)
	if !validEmail(email) {
		return domain.Account{}, domain.FieldError("email", "Indiquez une adresse email valide.")
	}
	if err := passwordLength("password", req.Password); err != nil {
		return domain.Account{}, err
	}
	// Counted once the request is valid, whether or not the email is taken
	// (a taken email must not be probed without limit either).
	retry, err := s.stores.Accounts.Attempt(ctx, []domain.ThrottleRule{{
		Key:   "register:net:" + domain.ClientNetwork(cl.IP),
		Limit: s.cfg.RegistrationsPerIP, Window: s.cfg.RegistrationWindow,
		Lockout: s.cfg.RegistrationWindow, MaxLockout: 24 * time.Hour,
	}})
	if err != nil {
		return domain.Account{}, err
	}
	if retry > 0 {
		s.countQuota(domain.QuotaRegistrations)
		return domain.Account{}, errTooMany(retry, "Trop de comptes créés depuis votre adresse.")
	}
	hash, err := s.hash(ctx, req.Password)
	if err != nil {
		return domain.Account{}, err
	}
	// Unconfirmed, with its confirmation mail queued in the same
	// transaction: the only mail the address gets until it is confirmed.
	// The same work and the same answer whether or not the address is
	// already an account's: that owner is mailed a notice instead of the
	// link, asynchronously as the link would be (postgres.RegisterAccount).
	return s.stores.Accounts.RegisterAccount(ctx, domain.Account{FirstName: first, LastName: last, Email: email}, hash, s.now())
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Bearer   bool   `json:"bearer"`
}

func (s *Server) login(c *gin.Context) {
	var req loginRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	acc, err := s.Login(c.Request.Context(), req.Email, req.Password, client(c))
	if tr, ok := asTOTPRequired(err); ok {
		s.answerTOTPRequired(c, tr)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	resp, err := s.startSession(c, acc, req.Bearer)
	s.answer(c, http.StatusOK, resp, err)
}

// Login checks a customer's email and password, under the login throttle
// and slow-down, and records the login in the account's activity; the
// caller then opens the session (OpenSession).
func (s *Server) Login(ctx context.Context, email, password string, cl domain.SessionClient) (domain.Account, error) {
	email = strings.TrimSpace(email)
	if email == "" {
		return domain.Account{}, domain.FieldError("email", "Indiquez votre adresse email.")
	}
	if password == "" {
		return domain.Account{}, domain.FieldError("password", "Indiquez votre mot de passe.")
	}
	network := domain.ClientNetwork(cl.IP)
	rules := s.loginRules(email, network)
	retry, err := s.stores.Accounts.Attempt(ctx, rules)
	if err != nil {
		return domain.Account{}, err
	}
	if retry > 0 {
		return domain.Account{}, errTooMany(retry, "Trop de tentatives de connexion échouées.")
	}
	// From here the attempt counts as a failure under the network's rules
	// until the password is right. The account's failures from this
	// network slow its logins from there down instead of locking them:
	// failures from other networks never slow its owner.
	slowKey := loginSlowKey(email, network)
	failures, err := s.stores.Accounts.LoginFailures(ctx, slowKey, s.cfg.LoginWindow)
	if err != nil {
		return domain.Account{}, err
	}
	if d := s.loginDelay(failures); d > 0 {
		if err := s.sleep(ctx, d); err != nil {
			return domain.Account{}, err
		}
	}
	acc, encoded, err := s.stores.Accounts.AccountByEmail(ctx, email)
	found := err == nil
	if err != nil && domain.ErrorCode(err) != domain.ECodeNotFound {
		return domain.Account{}, err
	}
	if !found {
		encoded = s.dummyHash // same work whether or not the email exists
	}
	ok, err := s.verify(ctx, encoded, password)
	if err != nil {
		return domain.Account{}, fmt.Errorf("verify password of account %d: %w", acc.ID, err)
	}
	if !found || !ok {
		if err := s.stores.Accounts.AddLoginFailure(ctx, slowKey, s.cfg.LoginWindow); err != nil {
			s.log.Warn("count login failure", "err", err)
		}
		if found {
			if err := s.stores.AccountPages.RecordLoginFailure(ctx, acc.ID, network, cl); err != nil {
				s.log.Warn("record login failure", "err", err)
			}
		}
		return domain.Account{}, errLoginFailed
	}
	// The right password: this attempt is taken back from the network's
	// counter, and the email-and-network counter forgotten.
	if err := s.stores.Accounts.Forgive(ctx, []string{rules[1].Key}, []string{rules[0].Key}); err != nil {
		s.log.Warn("forgive login attempt", "err", err)
	}
	// A second factor on: no session yet, the code step ends the login
	// (*TOTPRequired, LoginWithCode).
	if err := s.secondStep(ctx, acc); err != nil {
		return domain.Account{}, err
	}
	if err := s.stores.AccountPages.RecordActivity(ctx, acc.ID, domain.ActivityLogin, cl); err != nil {
		s.log.Warn("record account activity", "kind", domain.ActivityLogin, "err", err)
	}
	return acc, nil
}

// errLoginFailed answers every refused login alike, an address not yet
// confirmed included (postgres.AccountByEmail).
var errLoginFailed = domain.Errorf(domain.ECodeUnauthorized,
	"Email ou mot de passe incorrect. Si vous venez de créer votre compte, confirmez d'abord votre adresse avec le lien reçu par email.")

// loginRules are the locking counters of a login for email from network:
// the pair first, then the network (Forgive relies on the order). The
// account as a whole is not locked: see loginDelay.
func (s *Server) loginRules(email, network string) []domain.ThrottleRule {
	email = strings.ToLower(email)
	rule := func(key string, limit int) domain.ThrottleRule {
		return domain.ThrottleRule{Key: key, Limit: limit, Window: s.cfg.LoginWindow,
			Lockout: s.cfg.LoginLockout, MaxLockout: 24 * time.Hour}
	}
	return []domain.ThrottleRule{
		rule("login:pair:"+email+"|"+network, s.cfg.MaxFailuresPerEmail),
		rule("login:net:"+network, s.cfg.MaxFailuresPerIP),
	}
}

// loginSlowKey counts an email's failed logins from one client network.
func loginSlowKey(email, network string) string {
	return "login:slow:" + strings.ToLower(email) + "|" + network
}

// loginDelay is the wait before an email's password is checked, after
// failures failed logins on it from the client's network within
// LoginWindow: none below LoginSlowAfter, then LoginDelayBase doubled at
// each further failure, at most LoginDelayMax. It is the same whether the
// email has an account.
func (s *Server) loginDelay(failures int) time.Duration {
	over := failures - s.cfg.LoginSlowAfter
	if over < 0 {
		return 0
	}
	d := s.cfg.LoginDelayBase
	for range min(over, 30) {
		if d >= s.cfg.LoginDelayMax {
			break
		}
		d *= 2
	}
	return min(d, s.cfg.LoginDelayMax)
}

func (s *Server) logout(c *gin.Context) {
	if err := s.Logout(c.Request.Context(), customer(c)); err != nil {
		s.fail(c, err)
		return
	}
	s.clearSessionCookie(c)
	c.Status(http.StatusNoContent)
}

// Logout ends the caller's session.
func (s *Server) Logout(ctx context.Context, me *Customer) error {
	return s.stores.Accounts.DeleteSession(ctx, me.tokenHash)
}

// OpenSession opens a session for acc (after Register or Login) and sets
// its cookie on the answer.
func (s *Server) OpenSession(c *gin.Context, acc domain.Account) (*Customer, error) {
	resp, err := s.startSession(c, acc, false)
	return &resp, err
}

func (s *Server) me(c *gin.Context) {
	c.JSON(http.StatusOK, sessionResponse{Account: account(c), CSRFToken: c.GetString(ctxCSRF)})
}

type verifyEmailRequest struct {
	Token string `json:"token"`
}

// verifyEmail confirms an address with the link's token. No session is
// needed (the link may be opened on another device): the token alone,
// sealed with the keyring, names the account and the address. The site
// asks for a click before posting it, so a mail scanner fetching the link
// confirms nothing.
func (s *Server) verifyEmail(c *gin.Context) {
	var req verifyEmailRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	already, err := s.VerifyEmail(c.Request.Context(), req.Token)
	s.answer(c, http.StatusOK, gin.H{"email_verified": true, "already_verified": already}, err)
}

// VerifyEmail confirms an address with its link's token (no session
// needed); already when it was confirmed before.
func (s *Server) VerifyEmail(ctx context.Context, token string) (already bool, err error) {
	claim, err := s.links.Check(strings.TrimSpace(token))
	if err != nil {
		return false, err
	}
	already, err = s.stores.Accounts.VerifyEmail(ctx, claim.AccountID, claim.Email)
	if domain.ErrorCode(err) == domain.ECodeNotFound {
		return false, mailverify.ErrInvalid // the account is gone or its address changed
	}
	return already, err
}

// resendVerification queues one more confirmation mail for the signed-in
// account, within the resend limits.
func (s *Server) resendVerification(c *gin.Context) {
	err := s.ResendVerification(c.Request.Context(), customer(c))
	s.answer(c, http.StatusAccepted, gin.H{"email": account(c).Email}, err)
}

// ResendVerification mails the caller's confirmation link again, within
// its limits.
func (s *Server) ResendVerification(ctx context.Context, me *Customer) error {
	retry, err := s.stores.Accounts.ResendVerification(ctx, me.Account.ID, s.now(), s.cfg.VerifyResendEvery, s.cfg.VerifyResendPerDay)
	if err != nil {
		return err
	}
	if retry > 0 {
		return errTooMany(retry, "Un lien de confirmation vient déjà de vous être envoyé.")
	}
	return nil
}
