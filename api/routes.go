package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// pinger is what /healthz checks (Deps.Pinger: the database).
type pinger interface {
	PingContext(ctx context.Context) error
}

func (s *Server) routes() *gin.Engine {
	r := gin.New()
	if err := r.SetTrustedProxies(s.cfg.TrustedProxies); err != nil {
		s.log.Error("invalid trusted proxies, trusting none", "err", err)
		_ = r.SetTrustedProxies(nil)
	}
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, s.recovered), s.logRequests, securityHeaders, s.refuseControlInURL, s.checkOrigin, s.limitBody,
		s.gateWorkflowWrites, s.forgetViewsAfterWrites)
	r.NoRoute(func(c *gin.Context) {
		if s.site != nil && !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
			s.site.NotFound(c)
			return
		}
		s.fail(c, domain.Errorf(domain.ECodeNotFound, "Cette adresse n'existe pas dans l'API."))
	})

	r.GET("/healthz", s.healthz)

	v1 := r.Group("/v1")
	v1.GET("/openapi.yaml", serveOpenAPI)
	v1.GET("/catalog", s.getCatalog)
	v1.GET("/payment-methods", s.listMethods)
	v1.POST("/quote", s.postQuote)
	v1.POST("/auth/register", s.register)
	v1.POST("/auth/login", s.login)
	v1.POST("/auth/verify-email", s.verifyEmail)

	// The order read checks its session itself, in the statement that reads
	// the order (getOrder).
	v1.GET("/orders/:ref", s.getOrder)
	cust := v1.Group("", s.customerAuth)
	cust.POST("/auth/logout", s.logout)
	cust.GET("/me", s.me)
	cust.GET("/me/sessions", s.listSessions)
	cust.DELETE("/me/sessions/:id", s.endSession)
	cust.POST("/me/sessions/end-others", s.endOtherSessions)
	cust.POST("/me/password", s.changePassword)
	cust.GET("/me/activity", s.accountActivity)
	s.mountTwoFactor(v1, cust)
	cust.POST("/auth/verify-email/resend", s.resendVerification)
	cust.GET("/balance", s.getBalance)
	cust.GET("/balance/history", s.getBalanceHistory)
	cust.POST("/orders", s.createOrder)
	cust.GET("/orders", s.listOrders)
	cust.GET("/orders/:ref/events", s.orderEvents)
	cust.POST("/orders/:ref/cancel", s.cancelOrder)
	cust.POST("/orders/:ref/pay-from-balance", s.payFromBalance)
	cust.POST("/orders/:ref/take-back", s.takeBack)
	cust.GET("/orders/:ref/extensions", s.getExtensions)
	cust.POST("/orders/:ref/extensions", s.createExtension)
	cust.POST("/orders/:ref/support-requests", s.createSupportRequest)
	cust.POST("/orders/:ref/private-key", s.revealPrivateKey)
	cust.POST("/orders/:ref/ssh-key", s.replaceSSHKey)
	cust.POST("/orders/:ref/ssh-key/reissue", s.reissueSSHKey)
	cust.GET("/orders/:ref/ssh-key/request", s.getKeyRequest)
	cust.GET("/orders/:ref/support-requests", s.listSupportRequests)
	cust.POST("/topups", s.createTopUp)
	cust.GET("/topups", s.listTopUps)
	cust.GET("/topups/:ref", s.getTopUp)
	cust.GET("/topups/:ref/events", s.topUpEvents)
	cust.POST("/orders/:ref/payment-intents", s.createOrderIntent)
	cust.GET("/orders/:ref/payment-intents", s.listOrderIntents)
	cust.POST("/topups/:ref/payment-intents", s.createTopUpIntent)
	cust.GET("/topups/:ref/payment-intents", s.listTopUpIntents)
	cust.GET("/payment-intents/:id", s.getIntent)
	cust.POST("/payment-intents/:id/claim", s.claimPaid)
	cust.GET("/payment-intents/:id/qr.png", s.intentQR)

	// The console's session is opened with the token itself (support_console.go).
	v1.POST("/support/session", s.agentAuth, s.openAgentSession)
	sup := v1.Group("/support", s.supportAuth)
	sup.GET("/session", s.agentWhoAmI)
	sup.DELETE("/session", s.closeAgentSession)
	sup.GET("/orders/:ref", s.supportGetOrder)
	sup.POST("/orders/:ref/attribute-payment", s.supportAttributeOrderPayment)
	sup.POST("/orders/:ref/extend", s.supportExtend)
	sup.POST("/orders/:ref/end-early", s.supportEndEarly)
	sup.POST("/orders/:ref/retry-provisioning", s.supportRetryProvisioning)
	sup.POST("/orders/:ref/cancel", s.supportCancelOrder)
	sup.POST("/orders/:ref/refund", s.supportRefund)
	sup.GET("/topups/:ref", s.supportGetTopUp)
	sup.GET("/support-requests", s.supportOpenRequests)
	sup.POST("/support-requests/:id/answer", s.supportAnswer)
	sup.POST("/topups/:ref/attribute-payment", s.supportAttributeTopUpPayment)
	sup.POST("/topups/:ref/cancel", s.supportCancelTopUp)
	sup.GET("/exceptions", s.supportExceptions)
	sup.GET("/provisioning-failures", s.supportProvisioningFailures)
	sup.GET("/teardowns-stuck", s.supportTeardownsStuck)
	sup.GET("/host-flags", s.supportHostFlags)
	sup.GET("/machine-queue", s.supportMachineQueue)
	sup.POST("/orders/:ref/close-host-flag", s.supportCloseHostFlag)
	sup.GET("/accounts/:id", s.supportGetAccount)
	sup.POST("/exceptions/:id/refund", s.supportRefundException)
	sup.POST("/exceptions/:id/count", s.supportCountException)
	sup.POST("/exceptions/:id/resolve", s.supportResolveException)
	sup.POST("/exceptions/:id/value", s.supportValueException)
	sup.GET("/actions/awaiting-approval", s.supportAwaitingApproval)
	sup.POST("/actions/:id/approve", s.supportApproveAction)
	sup.POST("/actions/:id/decline", s.supportDeclineAction)
	sup.GET("/find", s.supportFind)
	sup.GET("/cases", s.supportCases)
	sup.GET("/cases.csv", s.supportCasesCSV)
	sup.GET("/hosts", s.supportHosts)
	sup.GET("/events", s.supportQueueEvents)
	sup.GET("/orders/:ref/events", s.supportOrderEvents)
	sup.GET("/topups/:ref/events", s.supportTopUpEvents)
	sup.POST("/hosts/:name/repair", s.supportRepairHost)
	sup.POST("/hosts/:name/retire", s.supportRetireHost)
	s.mountPayouts(cust, sup)
	if s.site != nil {
		s.site.Mount(r, s)
	}
	return r
}

// forgetViewsAfterWrites empties the cached order views after every request
// that may have written (anything but a GET, HEAD or OPTIONS), before the
// first byte of its answer: the writer's next read is of what they did.
func (s *Server) forgetViewsAfterWrites(c *gin.Context) {
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		c.Next()
		return
	}
	if s.views == nil {
		c.Next()
		return
	}
	c.Writer = &forgetOnAnswer{ResponseWriter: c.Writer, forget: s.views.ForgetOrderViews}
	c.Next()
	s.views.ForgetOrderViews() // nothing written yet: net/http answers now
}

// forgetOnAnswer calls forget before the answer's header is written.
type forgetOnAnswer struct {
	gin.ResponseWriter
	forget func()
	done   bool
}

func (w *forgetOnAnswer) before() {
	if !w.done {
		w.done = true
		w.forget()
	}
}

func (w *forgetOnAnswer) WriteHeader(code int) { w.before(); w.ResponseWriter.WriteHeader(code) }
func (w *forgetOnAnswer) WriteHeaderNow()      { w.before(); w.ResponseWriter.WriteHeaderNow() }
func (w *forgetOnAnswer) Write(b []byte) (int, error) {
	w.before()
	return w.ResponseWriter.Write(b)
}
func (w *forgetOnAnswer) WriteString(str string) (int, error) {
	w.before()
	return w.ResponseWriter.WriteString(str)
}

func (s *Server) healthz(c *gin.Context) {
	if s.pinger != nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := s.pinger.PingContext(ctx); err != nil {
			s.log.Warn("healthz: database unreachable", "err", err)
			s.fail(c, errUnavailable)
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}
