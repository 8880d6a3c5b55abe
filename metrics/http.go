package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP counts the API's requests by method, route template and status, with
// their latency.
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTP(reg prometheus.Registerer) *HTTP {
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: FamHTTPRequests, Help: "HTTP requests answered, by method, route template and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: FamHTTPDuration, Help: "HTTP request latency, by method and route template.", Buckets: latencyBuckets,
		}, []string{"method", "route"}),
	}
	reg.MustRegister(h.requests, h.duration)
	return h
}

// ObserveRequest records one answered request. route is the route template
// ("/v1/orders/:ref"), never the raw path, so labels stay few.
func (h *HTTP) ObserveRequest(method, route string, status int, d time.Duration) {
	method = knownMethod(method)
	h.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	h.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

// knownMethod keeps the label set bounded whatever method a client sends.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
