package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// The gauges behind the alerts on backlogs and ages (issue 38, item 6):
// mail not delivered, orders that do not move, rates no longer observed,
// unpaid orders holding their whole share of a model.
const (
	FamMailOldestWaiting  = "kernodeck_mail_outbox_oldest_waiting_seconds"
	FamOrdersOldest       = "kernodeck_orders_oldest_unchanged_seconds"
	FamRateAge            = "kernodeck_rate_age_seconds"
	FamRateSampleInterval = "kernodeck_rate_sample_interval_seconds"
	FamUnpaidHolds        = "kernodeck_unpaid_holds"
	FamUnpaidHoldsLimit   = "kernodeck_unpaid_holds_limit"
	FamPayoutsOldest      = "kernodeck_payouts_oldest_unchanged_seconds"
	FamPayoutsWaiting     = "kernodeck_payouts"
)

// PayoutStatuses are the statuses a payout waits in (for an agent, a
// batch, a signature, the chain): their oldest age is alerted on.
var PayoutStatuses = []string{string(domain.PayoutRequested), string(domain.PayoutApproved),
	string(domain.PayoutBatched), string(domain.PayoutSigned), string(domain.PayoutSeen)}

// PayoutStats reads the payouts' ages per status (implemented by
// *postgres.DB).
type PayoutStats interface {
	PayoutsAgeInStatus(ctx context.Context, statuses []string) ([]postgres.StatusAge, error)
}

// CollectPayouts exports, for each of PayoutStatuses, how many payouts
// wait in it and how long the one unchanged the longest has (0 when none):
// a payout nobody approves, batches or signs, or whose transfer the chain
// never shows, grows an age that pages someone. The worker does.
func (m *Metrics) CollectPayouts(s PayoutStats) {
	oldest := prometheus.NewDesc(FamPayoutsOldest, "Seconds since the payout unchanged the longest in this status last changed (0 when none).", []string{"status"}, nil)
	waiting := prometheus.NewDesc(FamPayoutsWaiting, "Payouts in this status.", []string{"status"}, nil)
	m.scrapeErrors().WithLabelValues("payouts")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{oldest, waiting}, source: "payouts", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			ages, err := s.PayoutsAgeInStatus(ctx, PayoutStatuses)
			if err != nil {
				return err
			}
			for _, a := range ages {
				ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, a.OldestSeconds, a.Status)
				ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(a.Count), a.Status)
			}
			return nil
		},
	})
}

// StuckStatuses are the order statuses an order should leave within
// minutes once paid; their oldest age is alerted on.
var StuckStatuses = []string{domain.StatusPaid, domain.StatusProvisioning}

// BacklogStats reads the mail backlog and the orders' ages per status
// (implemented by *postgres.DB).
type BacklogStats interface {
	MailBacklog(ctx context.Context) (postgres.Backlog, error)
	OrdersAgeInStatus(ctx context.Context, statuses []string) ([]postgres.StatusAge, error)
}

// CollectBacklogs exports the age of the oldest customer mail not yet
// delivered (pending or sending; 0 when none), and for each of
// StuckStatuses the age of the order in it unchanged the longest (0 when
// none). Both are always exported, so their alerts read a series from the
// start. The worker does, beside CollectOrders.
func (m *Metrics) CollectBacklogs(s BacklogStats) {
	mail := prometheus.NewDesc(FamMailOldestWaiting, "Age of the oldest customer mail not delivered yet (pending or sending), 0 when none waits.", nil, nil)
	orders := prometheus.NewDesc(FamOrdersOldest, "Seconds since the order unchanged the longest in this status last changed (paid, provisioning; 0 when none).", []string{"status"}, nil)
	m.scrapeErrors().WithLabelValues("backlogs")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{mail, orders}, source: "backlogs", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			b, err := s.MailBacklog(ctx)
			if err != nil {
				return err
			}
			ages, err := s.OrdersAgeInStatus(ctx, StuckStatuses)
			if err != nil {
				return err
			}
			ch <- prometheus.MustNewConstMetric(mail, prometheus.GaugeValue, b.OldestSeconds)
			for _, a := range ages {
				ch <- prometheus.MustNewConstMetric(orders, prometheus.GaugeValue, a.OldestSeconds, a.Status)
			}
			return nil
		},
	})
}

// RateStats reads the age of each asset's newest recorded rate
// (implemented by *postgres.DB).
type RateStats interface {
	RateAges(ctx context.Context, assets []string) ([]postgres.RateAge, error)
}

// CollectRates exports, for each of assets with a recorded rate, the age
// of its newest one, and the rate sampler's interval
// (KERNODECK_RATE_SAMPLE_INTERVAL): the sampler records every priced asset
// each interval, so an age of several intervals means the rate source
// answers no more (quotes then refuse with rate_unavailable).
func (m *Metrics) CollectRates(s RateStats, assets []string, interval time.Duration) {
	age := prometheus.NewDesc(FamRateAge, "Age of the newest rate recorded for the asset (rate history).", []string{"asset"}, nil)
	every := prometheus.NewDesc(FamRateSampleInterval, "How often the worker records every priced asset's rate (KERNODECK_RATE_SAMPLE_INTERVAL).", nil, nil)
	m.scrapeErrors().WithLabelValues("rates")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{age, every}, source: "rates", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			ch <- prometheus.MustNewConstMetric(every, prometheus.GaugeValue, interval.Seconds())
			ages, err := s.RateAges(ctx, assets)
			if err != nil {
				return err
			}
			for _, a := range ages {
				ch <- prometheus.MustNewConstMetric(age, prometheus.GaugeValue, a.Seconds, a.Asset)
			}
			return nil
		},
	})
}

// HoldStats reads the unpaid holds per model (implemented by *postgres.DB).
type HoldStats interface {
	UnpaidHoldsByModel(ctx context.Context, provisioner string) ([]postgres.UnpaidHolds, error)
}

// CollectUnpaidHolds exports, per GPU model, what holds of unpaid orders
// keep and the most they may keep (KERNODECK_UNPAID_HOLD_SHARE percent of
// the model's capacity, rounded down as the hold's check rounds; nil share:
// the whole capacity), in hosts with the SSH driver, GPUs otherwise. At the
// limit, a new payment request takes no hold: a paying customer still gets
// what is free, but unpaid orders have taken all they may.
func (m *Metrics) CollectUnpaidHolds(s HoldStats, provisioner string, share *int) {
	held := prometheus.NewDesc(FamUnpaidHolds, "Capacity held by unpaid orders (awaiting payment, payment detected), per model: hosts (SSH driver) or GPUs.", []string{"gpu_model"}, nil)
	limit := prometheus.NewDesc(FamUnpaidHoldsLimit, "The most unpaid orders may hold of the model (KERNODECK_UNPAID_HOLD_SHARE of its capacity), same unit.", []string{"gpu_model"}, nil)
	m.scrapeErrors().WithLabelValues("unpaid_holds")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{held, limit}, source: "unpaid_holds", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			models, err := s.UnpaidHoldsByModel(ctx, provisioner)
			if err != nil {
				return err
			}
			for _, h := range models {
				max := h.Capacity
				if share != nil {
					max = int64(*share) * h.Capacity / 100
				}
				ch <- prometheus.MustNewConstMetric(held, prometheus.GaugeValue, float64(h.Held), h.Model)
				ch <- prometheus.MustNewConstMetric(limit, prometheus.GaugeValue, float64(max), h.Model)
			}
			return nil
		},
	})
}
