package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
)

type countingViews struct{ n int }

func (v *countingViews) ForgetOrderViews() { v.n++ }

// firstByteWriter records how many times the views were forgotten when the
// answer's first byte (or header) was written.
type firstByteWriter struct {
	*httptest.ResponseRecorder
	views   *countingViews
	atFirst int
	wrote   bool
}

func (w *firstByteWriter) first() {
	if !w.wrote {
		w.wrote, w.atFirst = true, w.views.n
	}
}

func (w *firstByteWriter) WriteHeader(code int) { w.first(); w.ResponseRecorder.WriteHeader(code) }
func (w *firstByteWriter) Write(b []byte) (int, error) {
	w.first()
	return w.ResponseRecorder.Write(b)
}

// A write's answer leaves after the cached views are forgotten (its author
// reads what they did at once); a read forgets nothing.
func TestWritesForgetViewsBeforeTheirAnswer(t *testing.T) {
	views := &countingViews{}
	s := &Server{views: views}
	r := gin.New()
	r.Use(s.forgetViewsAfterWrites)
	body := strings.Repeat("x", 64<<10) // more than net/http buffers
	var during int
	handler := func(c *gin.Context) {
		during = views.n // the write happens here
		c.String(http.StatusOK, body)
	}
	r.POST("/w", handler)
	r.GET("/r", handler)

	w := &firstByteWriter{ResponseRecorder: httptest.NewRecorder(), views: views}
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/w", nil))
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, 0, during, "forgotten before the handler wrote")
	require.Equal(t, 1, w.atFirst, "the answer left before the views were forgotten")

	views.n = 0
	w = &firstByteWriter{ResponseRecorder: httptest.NewRecorder(), views: views}
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/r", nil))
	require.Equal(t, 0, views.n)
}
