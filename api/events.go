package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// orderEvents streams an order's tracking as server-sent events (see
// streamEvents), its state as "order" events.
func (s *Server) orderEvents(c *gin.Context) {
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	s.streamEvents(c, o.Ref, "order", func(ctx context.Context) (any, error) {
		o, err := s.stores.Orders.GetOrder(ctx, o.Ref)
		return viewOrder(o), err
	})
}

// topUpEvents streams a top-up's tracking the same way, its state as
// "topup" events.
func (s *Server) topUpEvents(c *gin.Context) {
	t, err := s.stores.TopUps.TopUpForAccount(c.Request.Context(), c.Param("ref"), account(c).ID)
	if err != nil {
		s.fail(c, notFoundAs(err, errTopUpNotFound))
		return
	}
	s.streamEvents(c, t.Ref, "topup", func(ctx context.Context) (any, error) {
		t, err := s.stores.TopUps.GetTopUp(ctx, t.Ref)
		return viewTopUp(t), err
	})
}

// streamEvents streams the tracking of an order or top-up (ref) as
// server-sent events:
//
//   - "timeline" events, one per timeline entry, with the entry's ID as the
//     SSE id (so a reconnecting EventSource resumes with Last-Event-ID;
//     ?after=<id> does the same for other clients);
//   - a kind event ("order", "topup") with the current state read by
//     state, at the start and whenever it changes, and again when the
//     payments seen on chain for its payment requests change: a block
//     adds a confirmation without a timeline entry nor a change of the
//     order, yet the checkout shows "x sur N";
//   - a comment every SSEHeartbeat to keep proxies from closing the stream.
//
// New entries, and new blocks under a payment of ref not yet confirmed
// (migration 00042), are noticed through the timeline notifier (PostgreSQL
// LISTEN), with a poll every SSEPoll as a fallback. Clients should ignore a
// timeline entry whose id they already have.
func (s *Server) streamEvents(c *gin.Context, ref, kind string, state func(context.Context) (any, error)) {
	s.runStream(c, s.customerStream(), ref, &streamState{kind: kind, state: state, timeline: true})
}

// streamAuth is how a live stream holds its place (quotas) and checks, now
// and then, that its credential is still valid.
type streamAuth struct {
	open  func(c *gin.Context) (release func(), ok bool)
	alive func(c *gin.Context) bool
}

// customerStream: a customer's stream (per session and account quotas).
func (s *Server) customerStream() streamAuth {
	return streamAuth{open: s.openStream, alive: s.sessionAlive}
}

// runStream serves st for ref (every reference: AnyRef) until the client
// leaves, the server closes, the stream's maximum age, or its credential
// ends.
func (s *Server) runStream(c *gin.Context, auth streamAuth, ref string, st *streamState) {
	after, err := resumeAfter(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	release, ok := auth.open(c)
	if !ok {
		return
	}
	defer release()
	var wake <-chan struct{}
	if s.notifier != nil {
		ch, unsubscribe := s.notifier.Subscribe(ref)
		defer unsubscribe()
		wake = ch
	}

	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A stream outlives any server write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})

	ctx := c.Request.Context()
	st.floor, st.lastID, st.sent = after, after, map[int64]bool{}
	if _, err := fmt.Fprintf(w, "retry: 3000\n\n"); err != nil {
		return
	}
	if err := s.push(c, st, ref); err != nil {
		s.log.Warn("event stream ended", "ref", ref, "err", err)
		return
	}
	poll := time.NewTicker(s.cfg.SSEPoll)
	defer poll.Stop()
	beat := time.NewTicker(s.cfg.SSEHeartbeat)
	defer beat.Stop()
	session := time.NewTicker(s.cfg.SSESessionCheck)
	defer session.Stop()
	maxAge := time.NewTimer(streamMaxAge(s.cfg.SSEMaxAge))
	defer maxAge.Stop()
	// pending is a push held back to keep st.minGap between two.
	var pending <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-maxAge.C:
			// Ending is enough: EventSource reconnects with Last-Event-ID,
			// and the new request goes through the session check again.
			return
		case <-session.C:
			if !auth.alive(c) {
				return
			}
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.Flush()
		case <-wake:
			if st.minGap > 0 {
				if pending == nil {
					pending = time.After(st.minGap - time.Since(st.pushedAt))
				}
				continue
			}
			if err := s.push(c, st, ref); err != nil {
				return
			}
		case <-pending:
			pending = nil
			if err := s.push(c, st, ref); err != nil {
				return
			}
		case <-poll.C:
			if err := s.push(c, st, ref); err != nil {
				return
			}
		}
	}
}

// streamMaxAge is max less a random part of up to a tenth, so that the
// streams opened together (after a deploy) do not all reconnect together.
func streamMaxAge(max time.Duration) time.Duration {
	if spread := int64(max / 10); spread > 0 {
		return max - time.Duration(rand.Int64N(spread))
	}
	return max
}

// sessionAlive reads the stream's session again: false once it is gone
// (logout, expiry) or cannot be read. A stream opened before a logout must
// not go on showing the account's orders.
func (s *Server) sessionAlive(c *gin.Context) bool {
	h, ok := c.Get(ctxTokenHash)
	if !ok {
		return false
	}
	hash, _ := h.([]byte)
	if _, _, err := s.stores.Accounts.PeekSession(c.Request.Context(), hash); err != nil {
		if domain.ErrorCode(err) != domain.ECodeNotFound && c.Request.Context().Err() == nil {
			s.log.Warn("event stream: session check failed, ending the stream", "err", err)
		}
		return false
	}
	return true
}

type streamState struct {
	kind  string                             // event name of the state
	state func(context.Context) (any, error) // reads the state
	// timeline: the stream sends ref's timeline entries, and the state
	// again when the payments seen for it change (an order's, a top-up's).
	timeline bool
	// minGap is the least time between two pushes woken by notifications
	// (0: none); pushedAt the last push.
	minGap    time.Duration
	pushedAt  time.Time
	floor     int64          // entries at or below were known to the client
	lastID    int64          // highest entry ID sent
	sent      map[int64]bool // entries sent on this stream
	lastState []byte         // last state payload sent
	lastPaid  []byte         // payments seen when it was sent
}

// push sends the timeline entries not sent yet, then the state if it or
// the payments seen changed. Entries are read from the floor each time, so
// one committed late with a lower ID is still delivered.
func (s *Server) push(c *gin.Context, st *streamState, ref string) error {
	ctx := c.Request.Context()
	st.pushedAt = time.Now()
	w := c.Writer
	var events []domain.TimelineEvent
	if st.timeline {
		var err error
		if events, err = s.stores.Orders.Timeline(ctx, ref, st.floor); err != nil {
			return err
		}
	}
	for _, ev := range events {
		if st.sent[ev.ID] {
			continue
		}
		data, err := json.Marshal(customerEvent(ev))
		if err != nil {
			return err
		}
		if ev.ID > st.lastID {
			st.lastID = ev.ID
			_, err = fmt.Fprintf(w, "id: %d\nevent: timeline\ndata: %s\n\n", ev.ID, data)
		} else {
			_, err = fmt.Fprintf(w, "event: timeline\ndata: %s\n\n", data)
		}
		if err != nil {
			return err
		}
		st.sent[ev.ID] = true
	}
	v, err := st.state(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var paidData []byte
	if st.timeline {
		paid, err := s.stores.Payments.IntentPayments(ctx, ref)
		if err != nil {
			return err
		}
		if paidData, err = json.Marshal(paid); err != nil {
			return err
		}
	}
	if string(data) != string(st.lastState) || string(paidData) != string(st.lastPaid) {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", st.kind, data); err != nil {
			return err
		}
		st.lastState, st.lastPaid = data, paidData
	}
	w.Flush()
	return nil
}

// resumeAfter reads where the client stopped: Last-Event-ID, or ?after=.
func resumeAfter(c *gin.Context) (int64, error) {
	v := c.GetHeader("Last-Event-ID")
	if v == "" {
		v = c.Query("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, domain.FieldError("after", "Le dernier identifiant d'événement reçu doit être un entier positif.")
	}
	return n, nil
}
