package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// SupportAgentStats reads, at scrape time, what support agents' money
// actions moved (implemented by *postgres.DB).
type SupportAgentStats interface {
	MovedByAgents(ctx context.Context) ([]postgres.AgentMoved, error)
	AwaitingApproval(ctx context.Context) ([]domain.SupportAction, error)
}

// CollectSupportAgents exports, per agent (those configured, 0 included,
// and any other with actions), the money their actions moved in the last
// 24 hours (asked or approved), the daily cap they are held to, and the
// money actions waiting for a second agent: an agent near the cap is
// alerted on (KernodeckSupportAgentNearDailyCap).
func (m *Metrics) CollectSupportAgents(s SupportAgentStats, capCents int64, agents []string) {
	moved := prometheus.NewDesc(FamSupportAgentMoved, "Money moved by each support agent's actions (asked or approved) in the last 24 hours, in USD cents.", []string{"agent"}, nil)
	limit := prometheus.NewDesc(FamSupportAgentCap, "The daily cap of one support agent's money actions (KERNODECK_AGENT_DAILY_CAP_CENTS), in USD cents.", nil, nil)
	waiting := prometheus.NewDesc(FamSupportAwaitingOwner, "Support money actions waiting for a second agent's approval.", nil, nil)
	m.scrapeErrors().WithLabelValues("support_agents")
	m.Registry.MustRegister(&dbCollector{
		descs: []*prometheus.Desc{moved, limit, waiting}, source: "support_agents", errors: m.scrapeErrors(),
		collect: func(ctx context.Context, ch chan<- prometheus.Metric) error {
			ch <- prometheus.MustNewConstMetric(limit, prometheus.GaugeValue, float64(capCents))
			list, err := s.MovedByAgents(ctx)
			if err != nil {
				return err
			}
			cents := map[string]int64{}
			for _, a := range agents {
				cents[a] = 0
			}
			for _, a := range list {
				cents[a.Agent] = a.Cents
			}
			for agent, c := range cents {
				ch <- prometheus.MustNewConstMetric(moved, prometheus.GaugeValue, float64(c), agent)
			}
			open, err := s.AwaitingApproval(ctx)
			if err != nil {
				return err
			}
			ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(len(open)))
			return nil
		},
	})
}
