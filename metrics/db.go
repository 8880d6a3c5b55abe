package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernodeck/kernodeck/postgres"
)

// OrderStats are the business counts read from the database at scrape time
// (implemented by *postgres.DB).
type OrderStats interface {
	OrdersByStatus(ctx context.Context) ([]postgres.StateCount, error)
	MailByState(ctx context.Context) ([]postgres.StateCount, error)
	OpenExceptionQueue(ctx context.Context) (postgres.ExceptionQueue, error)
}

// ChainStats are the chain payment counts read at scrape time.
type ChainStats interface {
	ChainPaymentsByState(ctx context.Context) ([]postgres.StateCount, error)
	UndeliveredPayments(ctx context.Context) ([]postgres.Undelivered, error)
}

// scrapeTimeout bounds the database queries of one scrape.
const scrapeTimeout = 5 * time.Second

// dbCollector runs its queries on each scrape: a failed query is counted in
// kernodeck_db_scrape_errors_total and its families are left out of that
// scrape (the rest still answers).
type dbCollector struct {
	descs   []*prometheus.Desc
	collect func(ctx context.Context, ch chan<- prometheus.Metric) error
	source  string
	errors  *prometheus.CounterVec
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if err := c.collect(ctx, ch); err != nil {
		c.errors.WithLabelValues(c.source).Inc()
	}
}

func (m *Metrics) scrapeErrors() *prometheus.CounterVec {
	if m.dbErrors == nil {
		m.dbErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: FamScrapeErrors, Help: "Database queries of a scrape that failed, by source.",
		}, []string{"source"})
		m.Registry.MustRegister(m.dbErrors)
	}
	return m.dbErrors
}

// CollectOrders exports orders by status, mail outbox rows by state and
// support's exception queue (the worker does; one process per deployment
// is enough).
func (m *Metrics) CollectOrders(s OrderStats) {
	orders := prometheus.NewDesc(FamOrders, "Orders by status.", []string{"status"}, nil)
	mail := prometheus.NewDesc(FamMailOutbox, "Mail outbox rows by state (pending, sending, sent, failed, unknown).", []string{"state"}, nil)
	exceptions := prometheus.NewDesc(FamExceptionsOpen, "Rows in support's exception queue: received amounts not yet counted or refunded, reorg flags not yet resolved.", nil, nil)
	exceptionsOldest := prometheus.NewDesc(FamExceptionsOldest, "Age of the oldest row in support's exception queue (0 when empty).", nil, nil)
	m.scrapeErrors().WithLabelValues("orders") // exported at 0 from the start
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{orders, mail, exceptions, exceptionsOldest}, source: "orders", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			byStatus, err := s.OrdersByStatus(ctx)
			if err != nil {
				return err
			}
			ms, err := s.MailByState(ctx)
			if err != nil {
				return err
			}
			for _, c := range byStatus {
				ch <- prometheus.MustNewConstMetric(orders, prometheus.GaugeValue, float64(c.Count), c.State)
			}
			q, err := s.OpenExceptionQueue(ctx)
			if err != nil {
				return err
			}
			for _, c := range ms {
				ch <- prometheus.MustNewConstMetric(mail, prometheus.GaugeValue, float64(c.Count), c.State)
			}
			ch <- prometheus.MustNewConstMetric(exceptions, prometheus.GaugeValue, float64(q.Open))
			ch <- prometheus.MustNewConstMetric(exceptionsOldest, prometheus.GaugeValue, q.OldestSeconds)
			return nil
		},
	})
}

// CollectChainPayments exports the chain payments per network and state,
// and those not yet delivered to their workflow (the chainwatch process does).
func (m *Metrics) CollectChainPayments(s ChainStats) {
	payments := prometheus.NewDesc(FamChainPayments, "Chain payments by network and state (seen, confirmed, reverted).", []string{"network", "state"}, nil)
	undelivered := prometheus.NewDesc(FamChainUndelivered, "Chain payments whose current state the workflow has not acknowledged.", []string{"network"}, nil)
	oldest := prometheus.NewDesc(FamChainUndelivOldest, "Age of the oldest undelivered chain payment state.", []string{"network"}, nil)
	m.scrapeErrors().WithLabelValues("chain_payments")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{payments, undelivered, oldest}, source: "chain_payments", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			ps, err := s.ChainPaymentsByState(ctx)
			if err != nil {
				return err
			}
			us, err := s.UndeliveredPayments(ctx)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, c := range ps {
				ch <- prometheus.MustNewConstMetric(payments, prometheus.GaugeValue, float64(c.Count), c.Network, c.State)
				seen[c.Network] = true
			}
			late := map[string]postgres.Undelivered{}
			for _, u := range us {
				late[u.Network] = u
			}
			// Every network with payments reports its undelivered count,
			// 0 included, so a dashboard and an alert see the series.
			for network := range seen {
				u := late[network]
				ch <- prometheus.MustNewConstMetric(undelivered, prometheus.GaugeValue, float64(u.Count), network)
				ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, u.OldestSeconds, network)
			}
			return nil
		},
	})
}
