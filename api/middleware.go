package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// logRequests logs each request once it is done: route, status, duration.
// Tokens, cookies and bodies are never logged.
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "(no route)"
	}
	took := time.Since(start)
	s.log.LogAttrs(c.Request.Context(), slog.LevelInfo, "http request",
		slog.String("method", c.Request.Method),
		slog.String("route", route),
		slog.Int("status", c.Writer.Status()),
		slog.Duration("duration", took),
		slog.String("client_ip", c.ClientIP()),
	)
	if s.requests != nil {
		s.requests.ObserveRequest(c.Request.Method, route, c.Writer.Status(), took)
	}
}

func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	c.Next()
}

func (s *Server) recovered(c *gin.Context, rec any) {
	s.log.Error("panic in handler", "route", c.FullPath(), "panic", rec)
	if !c.Writer.Written() {
		writeError(c, http.StatusInternalServerError, domain.ECodeInternal, domain.ErrorMessage(nil), "")
	}
	c.Abort()
}
