package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// orderEvents streams an order's tracking as server-sent events:
//
//   - "timeline" events, one per timeline entry, with the entry's ID as the
//     SSE id (so a reconnecting EventSource resumes with Last-Event-ID;
//     ?after=<id> does the same for other clients);
//   - an "order" event with the order's current state at the start and
//     whenever it changes;
//   - a comment every SSEHeartbeat to keep proxies from closing the stream.
//
// New entries are noticed through the timeline notifier (PostgreSQL
// LISTEN), with a poll every SSEPoll as a fallback. Clients should ignore a
// timeline entry whose id they already have.
func (s *Server) orderEvents(c *gin.Context) {
	o, ok := s.ownOrder(c)
	if !ok {
		return
	}
	after, err := resumeAfter(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var wake <-chan struct{}
	if s.notifier != nil {
		ch, unsubscribe := s.notifier.Subscribe(o.Ref)
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
	st := &streamState{floor: after, lastID: after, sent: map[int64]bool{}}
	if _, err := fmt.Fprintf(w, "retry: 3000\n\n"); err != nil {
		return
	}
	if err := s.pushOrder(c, st, o.Ref); err != nil {
		s.log.Warn("order stream ended", "ref", o.Ref, "err", err)
		return
	}
	poll := time.NewTicker(s.cfg.SSEPoll)
	defer poll.Stop()
	beat := time.NewTicker(s.cfg.SSEHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.Flush()
		case <-wake:
			if err := s.pushOrder(c, st, o.Ref); err != nil {
				return
			}
		case <-poll.C:
			if err := s.pushOrder(c, st, o.Ref); err != nil {
				return
			}
		}
	}
}

type streamState struct {
	floor     int64          // entries at or below were known to the client
	lastID    int64          // highest entry ID sent
	sent      map[int64]bool // entries sent on this stream
	lastOrder []byte         // last "order" payload sent
}

// pushOrder sends the timeline entries not sent yet, then the order if it
// changed. Entries are read from the floor each time, so one committed late
// with a lower ID is still delivered.
func (s *Server) pushOrder(c *gin.Context, st *streamState, ref string) error {
	ctx := c.Request.Context()
	events, err := s.store.Timeline(ctx, ref, st.floor)
	if err != nil {
		return err
	}
	w := c.Writer
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
	o, err := s.store.GetOrder(ctx, ref)
	if err != nil {
		return err
	}
	data, err := json.Marshal(viewOrder(o))
	if err != nil {
		return err
	}
	if string(data) != string(st.lastOrder) {
		if _, err := fmt.Fprintf(w, "event: order\ndata: %s\n\n", data); err != nil {
			return err
		}
		st.lastOrder = data
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
