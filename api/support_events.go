package api

import (
	"context"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// The support console's live parts follow server-sent events as the
// customer's order page does (runStream): an order's or a top-up's file,
// and the queue. They are agents' streams: supportAuth (a console session
// cookie without touching it, or the agent token), at most
// Quotas.StreamsPerSession per console session, ended once the session is.

// queueMinGap spaces the queue's pushes: every timeline notification of the
// shop wakes it, and four reads of the queue a second are enough.
const queueMinGap = 250 * time.Millisecond

// agentStreams counts the live streams of each console session.
type agentStreams struct {
	mu sync.Mutex
	n  map[string]int
}

// agentStream: an agent's stream.
func (s *Server) agentStream() streamAuth {
	return streamAuth{open: s.openAgentStream, alive: s.agentSessionAlive}
}

// openAgentStream takes one of the console session's stream places (a
// token's streams are not counted: the token is the agent's CLI).
func (s *Server) openAgentStream(c *gin.Context) (func(), bool) {
	h, ok := c.Get(ctxTokenHash)
	if !ok {
		return func() {}, true
	}
	hash, _ := h.([]byte)
	key := string(hash)
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	if s.streams.n[key] >= s.cfg.Quotas.StreamsPerSession {
		s.fail(c, domain.Errorf(domain.ECodeQuota, "Trop de mises à jour en direct ouvertes pour cette session : fermez des onglets de la console."))
		return nil, false
	}
	s.streams.n[key]++
	return func() {
		s.streams.mu.Lock()
		defer s.streams.mu.Unlock()
		if s.streams.n[key]--; s.streams.n[key] <= 0 {
			delete(s.streams.n, key)
		}
	}, true
}

// agentSessionAlive reads the stream's console session again (without
// recording a use): false once signed out, expired, or its token removed.
func (s *Server) agentSessionAlive(c *gin.Context) bool {
	h, ok := c.Get(ctxTokenHash)
	if !ok {
		return true // the agent token: checked at each connection
	}
	hash, _ := h.([]byte)
	sess, err := s.stores.AgentSessions.PeekAgentSession(c.Request.Context(), hash)
	if err != nil {
		if domain.ErrorCode(err) != domain.ECodeNotFound && c.Request.Context().Err() == nil {
			s.log.Warn("support stream: session check failed, ending the stream", "err", err)
		}
		return false
	}
	return s.agentTokenConfigured(sess)
}

// supportFileState is what an agent's file shows beside the timeline and
// main (the order's or top-up's own state): the support requests, the
// support actions and the queued amounts of ref.
func (s *Server) supportFileState(ref string, main func(context.Context) (any, error)) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		m, err := main(ctx)
		if err != nil {
			return nil, err
		}
		reqs, err := s.stores.Support.ListSupportRequests(ctx, ref, 0)
		if err != nil {
			return nil, err
		}
		acts, err := s.stores.Support.ListSupportActions(ctx, ref)
		if err != nil {
			return nil, err
		}
		es, err := s.stores.Support.ExceptionsOf(ctx, ref)
		if err != nil {
			return nil, err
		}
		return []any{m, reqs, acts, es}, nil
	}
}

// supportOrderEvents streams an order's file: its timeline, and an
// "order" event when the order, its payments seen, its support requests,
// actions or queued amounts change.
func (s *Server) supportOrderEvents(c *gin.Context) {
	o, err := s.stores.Orders.GetOrder(c.Request.Context(), c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errOrderNotFound))
		return
	}
	s.runStream(c, s.agentStream(), o.Ref, &streamState{kind: "order", timeline: true,
		state: s.supportFileState(o.Ref, func(ctx context.Context) (any, error) {
			o, err := s.stores.Orders.GetOrder(ctx, o.Ref)
			return viewOrder(o), err
		})})
}

// supportTopUpEvents streams a top-up's file the same way ("topup").
func (s *Server) supportTopUpEvents(c *gin.Context) {
	t, err := s.stores.TopUps.GetTopUp(c.Request.Context(), c.Param("ref"))
	if err != nil {
		s.fail(c, notFoundAs(err, errTopUpNotFound))
		return
	}
	s.runStream(c, s.agentStream(), t.Ref, &streamState{kind: "topup", timeline: true,
		state: s.supportFileState(t.Ref, func(ctx context.Context) (any, error) {
			t, err := s.stores.TopUps.GetTopUp(ctx, t.Ref)
			return viewTopUp(t), err
		})})
}

// supportQueueEvents streams the queue: a "queue" event at the start and
// whenever the queued amounts, the unanswered support requests, the
// failed provisionings or the stuck teardowns change (woken by any
// reference's notification, at most once per queueMinGap).
func (s *Server) supportQueueEvents(c *gin.Context) {
	s.runStream(c, s.agentStream(), anyRef, &streamState{kind: "queue", minGap: queueMinGap, state: s.queueState})
}

// anyRef subscribes to every reference's notifications (TimelineNotifier).
const anyRef = ""

func (s *Server) queueState(ctx context.Context) (any, error) {
	es, err := s.stores.Support.OpenExceptions(ctx)
	if err != nil {
		return nil, err
	}
	reqs, err := s.stores.Support.OpenSupportRequests(ctx, openRequestsShown)
	if err != nil {
		return nil, err
	}
	stuck, err := s.stores.SupportHosts.ProvisioningFailures(ctx)
	if err != nil {
		return nil, err
	}
	teardowns, err := s.stores.SupportHosts.TeardownsStuck(ctx)
	if err != nil {
		return nil, err
	}
	// The line for machines (its page is live on this stream too).
	waiting, err := s.stores.SupportHosts.MachineQueue(ctx)
	if err != nil {
		return nil, err
	}
	// The queue's counts and identities, not its contents: the page reads
	// those itself.
	type item struct {
		ID    int64 `json:"id"`
		Left  int64 `json:"left"`
		Value bool  `json:"needs_value"`
	}
	q := struct {
		Exceptions []item   `json:"exceptions"`
		Requests   []int64  `json:"support_requests"`
		Stuck      []string `json:"provisioning_failed"`
		Teardowns  []string `json:"teardown_stuck"`
		Waiting    []string `json:"waiting_for_machine"`
	}{Exceptions: []item{}, Requests: []int64{}, Stuck: []string{}, Teardowns: []string{}, Waiting: []string{}}
	for _, e := range viewExceptions(es) {
		q.Exceptions = append(q.Exceptions, item{e.ID, e.RemainingCents, e.NeedsValue})
	}
	for _, r := range reqs {
		q.Requests = append(q.Requests, r.ID)
	}
	for _, o := range stuck {
		q.Stuck = append(q.Stuck, o.Ref)
	}
	for _, o := range teardowns {
		q.Teardowns = append(q.Teardowns, o.Ref)
	}
	for _, o := range waiting {
		q.Waiting = append(q.Waiting, o.Ref)
	}
	return q, nil
}
