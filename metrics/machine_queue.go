package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernodeck/kernodeck/postgres"
)

// MachineQueueStats reads the line per GPU model at scrape time
// (implemented by *postgres.DB).
type MachineQueueStats interface {
	MachineQueueStats(ctx context.Context, overdueAfter time.Duration) ([]postgres.MachineQueueStat, error)
}

// CollectMachineQueue exports, per GPU model of the catalog (0 when none
// waits), the paid orders waiting for a machine and the age of the oldest
// wait (since payment), and in all the orders that have waited longer than
// alertAfter (KERNODECK_QUEUE_ALERT_AFTER; always exported, 0 included, so
// its alert reads a series from the start). The worker does, beside
// CollectOrders.
func (m *Metrics) CollectMachineQueue(s MachineQueueStats, alertAfter time.Duration) {
	waiting := prometheus.NewDesc(FamMachineQueueWaiting, "Paid orders waiting for a machine, by GPU model (every size).", []string{"gpu_model"}, nil)
	oldest := prometheus.NewDesc(FamMachineQueueOldest, "Age since payment of the oldest order waiting for a machine, by GPU model (0 when none waits).", []string{"gpu_model"}, nil)
	overdue := prometheus.NewDesc(FamMachineQueueOverdue, "Paid orders waiting for a machine longer than KERNODECK_QUEUE_ALERT_AFTER ("+alertAfter.String()+").", nil, nil)
	m.scrapeErrors().WithLabelValues("machine_queue") // exported at 0 from the start
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{waiting, oldest, overdue}, source: "machine_queue", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			stats, err := s.MachineQueueStats(ctx, alertAfter)
			if err != nil {
				return err
			}
			var late int64
			for _, st := range stats {
				ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(st.Waiting), st.Model)
				ch <- prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, st.OldestSeconds, st.Model)
				late += st.Overdue
			}
			ch <- prometheus.MustNewConstMetric(overdue, prometheus.GaugeValue, float64(late))
			return nil
		},
	})
}
