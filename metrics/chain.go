package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernodeck/kernodeck/chainwatch"
)

// Chains follows each block-based watcher of this process through
// decorators of its Chain (node height) and Store (processed height, time of
// the last block processed). Only the watcher holding its network's lease
// processes blocks; a standby reports the node height alone.
type Chains struct {
	now func() time.Time

	mu       sync.Mutex
	networks map[string]*chainState

	nodeHeight, processed, since *prometheus.Desc
}

type chainState struct {
	nodeHeight    int64
	hasNode       bool
	processed     int64
	lastProcessed time.Time // zero until the cursor is known
}

func newChains(reg prometheus.Registerer) *Chains {
	c := &Chains{
		now:      time.Now,
		networks: map[string]*chainState{},
		nodeHeight: prometheus.NewDesc(FamChainNodeHeight,
			"Newest height the watcher may read from its node (best, solidified or finalized block).", []string{"network"}, nil),
		processed: prometheus.NewDesc(FamChainProcessed,
			"Height of the newest block the watcher recorded (its cursor).", []string{"network"}, nil),
		since: prometheus.NewDesc(FamChainSinceBlock,
			"Seconds since this watcher last recorded a block (or read its cursor at start).", []string{"network"}, nil),
	}
	reg.MustRegister(c)
	return c
}

// Describe implements prometheus.Collector.
func (c *Chains) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.nodeHeight
	ch <- c.processed
	ch <- c.since
}

// Collect implements prometheus.Collector: the seconds since the last block
// are computed at scrape time.
func (c *Chains) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for network, s := range c.networks {
		if s.hasNode {
			ch <- prometheus.MustNewConstMetric(c.nodeHeight, prometheus.GaugeValue, float64(s.nodeHeight), network)
		}
		if !s.lastProcessed.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.processed, prometheus.GaugeValue, float64(s.processed), network)
			ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, now.Sub(s.lastProcessed).Seconds(), network)
		}
	}
}

func (c *Chains) update(network string, fn func(s *chainState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.networks[network]
	if s == nil {
		s = &chainState{}
		c.networks[network] = s
	}
	fn(s)
}

// Chain decorates a watcher's chain: each tip read sets the node height.
func (c *Chains) Chain(ch chainwatch.Chain) chainwatch.Chain { return &chainTap{Chain: ch, c: c} }

// Store decorates a watcher's store: the cursor read at start and each
// recorded block set the processed height. Methods it does not override
// pass through untouched.
func (c *Chains) Store(s chainwatch.Store) chainwatch.Store { return &storeTap{Store: s, c: c} }

type chainTap struct {
	chainwatch.Chain
	c *Chains
}

func (t *chainTap) Tip(ctx context.Context) (int64, error) {
	h, err := t.Chain.Tip(ctx)
	if err == nil {
		t.c.update(t.Network(), func(s *chainState) { s.nodeHeight, s.hasNode = h, true })
	}
	return h, err
}

type storeTap struct {
	chainwatch.Store
	c *Chains
}

func (t *storeTap) LastBlock(ctx context.Context, network string) (int64, string, bool, error) {
	h, hash, ok, err := t.Store.LastBlock(ctx, network)
	if err == nil && ok {
		t.c.update(network, func(s *chainState) {
			if s.lastProcessed.IsZero() {
				s.processed, s.lastProcessed = h, t.c.now()
			}
		})
	}
	return h, hash, ok, err
}

func (t *storeTap) RecordBlock(ctx context.Context, network, holder string, height int64, hash string, payments []chainwatch.Seen) error {
	err := t.Store.RecordBlock(ctx, network, holder, height, hash, payments)
	if err == nil {
		t.c.update(network, func(s *chainState) { s.processed, s.lastProcessed = height, t.c.now() })
	}
	return err
}
