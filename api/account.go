package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// AccountPageStore keeps what a customer manages of their own account:
// open sessions, password, activity (postgres/account_sessions.go).
type AccountPageStore interface {
	AccountSessions(ctx context.Context, accountID int64, current []byte) ([]domain.Session, error)
	EndSession(ctx context.Context, accountID, id int64, current []byte, client domain.SessionClient) (wasCurrent bool, err error)
	EndOtherSessions(ctx context.Context, accountID int64, keep []byte, client domain.SessionClient) (int64, error)
	PasswordHash(ctx context.Context, accountID int64) (string, error)
	ChangePassword(ctx context.Context, accountID int64, oldHash, newHash string, keep []byte, client domain.SessionClient) (int64, error)
	RecordActivity(ctx context.Context, accountID int64, kind string, client domain.SessionClient) error
	RecordLoginFailure(ctx context.Context, accountID int64, network string, client domain.SessionClient) error
	AccountActivity(ctx context.Context, accountID int64, limit int, since time.Time) ([]domain.AccountActivity, []domain.LoginFailures, int, error)
}

// activityShown is how many activity entries GET /v1/me/activity returns;
// failed logins are counted over failedLoginsWindow.
const (
	activityShown      = 50
	failedLoginsWindow = 30 * 24 * time.Hour
)

// client is what the account's sessions and activity record of the caller.
func client(c *gin.Context) domain.SessionClient {
	return domain.NewSessionClient(c.GetHeader("User-Agent"), c.ClientIP())
}

// currentSession is the hash of the request's own session token.
func currentSession(c *gin.Context) []byte { return c.MustGet(ctxTokenHash).([]byte) }

type sessionsResponse struct {
	Sessions []domain.Session `json:"sessions"`
}

func (s *Server) listSessions(c *gin.Context) {
	out, err := s.Sessions(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, sessionsResponse{Sessions: out})
}

// endSession ends one of the caller's sessions (its next request asks to
// sign in). Ending the current one is a logout.
func (s *Server) endSession(c *gin.Context) {
	id, _ := strconv.ParseInt(c.Param("id"), 10, 64)
	wasCurrent, err := s.EndSession(c.Request.Context(), customer(c), id, client(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	if wasCurrent {
		s.clearSessionCookie(c)
	}
	c.Status(http.StatusNoContent)
}

// EndSession ends the caller's session id (from another device: its next
// request asks to sign in); wasCurrent when it was the caller's own.
func (s *Server) EndSession(ctx context.Context, me *Customer, id int64, cl domain.SessionClient) (wasCurrent bool, err error) {
	if id <= 0 {
		return false, domain.ErrSessionNotFound
	}
	return s.stores.AccountPages.EndSession(ctx, me.Account.ID, id, me.tokenHash, cl)
}

type endedResponse struct {
	// SessionsEnded counts the open sessions ended.
	SessionsEnded int64 `json:"sessions_ended"`
}

func (s *Server) endOtherSessions(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	n, err := s.EndOtherSessions(c.Request.Context(), customer(c), client(c))
	s.answer(c, http.StatusOK, endedResponse{SessionsEnded: n}, err)
}

// EndOtherSessions ends every session of the caller's but this one.
func (s *Server) EndOtherSessions(ctx context.Context, me *Customer, cl domain.SessionClient) (int64, error) {
	return s.stores.AccountPages.EndOtherSessions(ctx, me.Account.ID, me.tokenHash, cl)
}

type passwordChangeRequest struct {
	CurrentPassword string `json:"current_password"`
	// TOTPCode is the second factor's code (or a recovery code), needed
	// when the account has 2FA on.
	TOTPCode    string `json:"totp_code"`
	NewPassword string `json:"new_password"`
}

// passwordLength checks a new password's length (register and change).
func passwordLength(field, password string) error {
	if n := utf8.RuneCountInString(password); n < domain.MinPasswordLen || n > domain.MaxPasswordLen {
		return domain.FieldError(field, fmt.Sprintf(
			"Le mot de passe doit comporter de %d à %d caractères.", domain.MinPasswordLen, domain.MaxPasswordLen))
	}
	return nil
}

// changePassword replaces the caller's password, the current one given
// again (a session left open elsewhere is not enough), and ends every other
// session: the old password and the sessions opened with it stop working.
// Wrong current passwords are throttled per account, as logins are.
func (s *Server) changePassword(c *gin.Context) {
	var req passwordChangeRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	n, err := s.ChangePassword(c.Request.Context(), customer(c), req.CurrentPassword, req.NewPassword, req.TOTPCode, client(c))
	s.answer(c, http.StatusOK, endedResponse{SessionsEnded: n}, err)
}

// ChangePassword replaces the caller's password, the current one given
// again (and the second factor's code when 2FA is on), and ends every
// other session; it returns how many were ended.
func (s *Server) ChangePassword(ctx context.Context, me *Customer, current, next, code string, cl domain.SessionClient) (int64, error) {
	if current == "" {
		return 0, domain.FieldError("current_password", "Indiquez votre mot de passe actuel.")
	}
	if err := passwordLength("new_password", next); err != nil {
		return 0, err
	}
	if next == current {
		return 0, domain.FieldError("new_password", "Choisissez un nouveau mot de passe différent de l'actuel.")
	}
	acc := me.Account
	rule := domain.ThrottleRule{Key: "password:account:" + strconv.FormatInt(acc.ID, 10),
		Limit: s.cfg.MaxFailuresPerEmail, Window: s.cfg.LoginWindow, Lockout: s.cfg.LoginLockout, MaxLockout: 24 * time.Hour}
	retry, err := s.stores.Accounts.Attempt(ctx, []domain.ThrottleRule{rule})
	if err != nil {
		return 0, err
	}
	if retry > 0 {
		return 0, errTooMany(retry, "Trop de mots de passe actuels incorrects.")
	}
	old, err := s.stores.AccountPages.PasswordHash(ctx, acc.ID)
	if err != nil {
		return 0, err
	}
	ok, err := s.verify(ctx, old, current)
	if err != nil {
		return 0, fmt.Errorf("verify password of account %d: %w", acc.ID, err)
	}
	if !ok {
		return 0, domain.ErrWrongPassword // the attempt stays counted
	}
	if err := s.stores.Accounts.Forgive(ctx, nil, []string{rule.Key}); err != nil {
		s.log.Warn("forgive password attempt", "err", err)
	}
	if err := s.RequireSecondFactor(ctx, acc.ID, code); err != nil {
		return 0, err
	}
	hash, err := s.hash(ctx, next)
	if err != nil {
		return 0, err
	}
	return s.stores.AccountPages.ChangePassword(ctx, acc.ID, old, hash, me.tokenHash, cl)
}

type activityResponse struct {
	// Activity is the account's own actions: logins, password changes,
	// sessions ended.
	Activity []domain.AccountActivity `json:"activity"`
	// LoginFailures groups the wrong passwords of the last 30 days per
	// client network and day, the latest first.
	LoginFailures []domain.LoginFailures `json:"login_failures"`
	// FailedLogins counts wrong passwords given for the account's email in
	// the last 30 days.
	FailedLogins int `json:"failed_logins_30_days"`
}

func (s *Server) accountActivity(c *gin.Context) {
	a, err := s.Activity(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}
