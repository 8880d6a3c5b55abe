package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// The second factor's routes (totp.go): /v1/auth/login/totp ends a login
// the password step left pending; /v1/me/2fa* set it up and turn it off.
func (s *Server) mountTwoFactor(v1, cust *gin.RouterGroup) {
	v1.POST("/auth/login/totp", s.loginTOTP)
	cust.GET("/me/2fa", s.getTwoFactor)
	cust.POST("/me/2fa/setup", s.setupTwoFactor)
	cust.GET("/me/2fa/qr.png", s.twoFactorQR)
	cust.POST("/me/2fa/confirm", s.confirmTwoFactor)
	cust.POST("/me/2fa/disable", s.disableTwoFactor)
}

// totpRequiredBody answers a login that needs its code: the error, and the
// pending login's token for POST /v1/auth/login/totp.
type totpRequiredBody struct {
	Error      errorDetail `json:"error"`
	LoginToken string      `json:"login_token"`
	ExpiresAt  time.Time   `json:"expires_at"`
}

func (s *Server) answerTOTPRequired(c *gin.Context, tr *TOTPRequired) {
	c.AbortWithStatusJSON(http.StatusUnauthorized, totpRequiredBody{
		Error:      errorDetail{Code: ECodeTOTPRequired, Message: errTOTPRequired.Message},
		LoginToken: tr.LoginToken, ExpiresAt: tr.ExpiresAt})
}

type loginTOTPRequest struct {
	LoginToken string `json:"login_token"`
	Code       string `json:"code"`
	Bearer     bool   `json:"bearer"`
}

func (s *Server) loginTOTP(c *gin.Context) {
	var req loginTOTPRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	acc, err := s.LoginWithCode(c.Request.Context(), req.LoginToken, req.Code, client(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	resp, err := s.startSession(c, acc, req.Bearer)
	s.answer(c, http.StatusOK, resp, err)
}

func (s *Server) getTwoFactor(c *gin.Context) {
	st, err := s.TwoFactorStatus(c.Request.Context(), customer(c))
	s.answer(c, http.StatusOK, st, err)
}

func (s *Server) setupTwoFactor(c *gin.Context) {
	var req struct{}
	if err := s.decodeJSON(c, &req, true); err != nil {
		s.fail(c, err)
		return
	}
	setup, err := s.BeginTwoFactor(c.Request.Context(), customer(c))
	c.Header("Cache-Control", "no-store")
	s.answer(c, http.StatusOK, setup, err)
}

func (s *Server) twoFactorQR(c *gin.Context) {
	png, err := s.TwoFactorQR(c.Request.Context(), customer(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "image/png", png)
}

type twoFactorCodeRequest struct {
	Code string `json:"code"`
}

type recoveryCodesResponse struct {
	Enabled       bool     `json:"enabled"`
	RecoveryCodes []string `json:"recovery_codes"`
}

func (s *Server) confirmTwoFactor(c *gin.Context) {
	var req twoFactorCodeRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	codes, err := s.ConfirmTwoFactor(c.Request.Context(), customer(c), req.Code)
	c.Header("Cache-Control", "no-store")
	s.answer(c, http.StatusOK, recoveryCodesResponse{Enabled: true, RecoveryCodes: codes}, err)
}

func (s *Server) disableTwoFactor(c *gin.Context) {
	var req twoFactorCodeRequest
	if err := s.decodeJSON(c, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	err := s.DisableTwoFactor(c.Request.Context(), customer(c), req.Code)
	s.answer(c, http.StatusOK, TwoFactorStatus{Available: true}, err)
}
