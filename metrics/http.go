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
	quotas   *prometheus.CounterVec
}

func newHTTP(reg prometheus.Registerer) *HTTP {
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: FamHTTPRequests, Help: "HTTP requests answered, by method, route template and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: FamHTTPDuration, Help: "HTTP request latency, by method and route template.", Buckets: latencyBuckets,
		}, []string{"method", "route"}),
		quotas: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: FamQuotaRefusals,
			Help: "Requests a quota refused (429) or absorbed (a repeated \"J'ai payé\"), by quota (domain.Quota*).",
		}, []string{"quota"}),
	}
	reg.MustRegister(h.requests, h.duration, h.quotas)
	return h
}

// QuotaRefused counts one request a quota refused (the API's
// QuotaObserver). Quota names are the API's own constants: few labels.
func (h *HTTP) QuotaRefused(quota string) {
	h.quotas.WithLabelValues(quota).Inc()
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
