package web

// The line of paid orders waiting for a machine in the support console,
// /support/machine-queue (issue 35): each line (GPU model and size) in
// payment order, read from the MachineQueue service. Support adds or
// repairs a host of that model (Hôtes), or refunds an order to its
// customer's balance from its file.

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/domain"
)

// machineLine is one line of the page: the orders waiting for a machine of
// one model and size, the next served first.
type machineLine struct {
	Model     string
	TotalGPUs int
	Orders    []waitingRow
}

// waitingRow is a waiting order with its wait said in French.
type waitingRow struct {
	domain.WaitingOrder
	Waited string
}

type consoleMachineQueueData struct {
	Waiting int
	Lines   []machineLine
}

// consoleMachineQueue shows the line for machines, live: the support
// queue's event stream says when it changes.
func (s *Site) consoleMachineQueue(c *gin.Context) {
	a, ok := s.signedInAgent(c)
	if !ok {
		return
	}
	orders, err := s.svc.MachineQueue(c.Request.Context(), a)
	if err != nil {
		s.consoleFail(c, a, err)
		return
	}
	p := agentPage(a, "File d'attente des machines")
	p.Data = machineLines(orders)
	s.renderConsole(c, http.StatusOK, "support_machine_queue", p, liveRegion{URL: "/support/machine-queue/live",
		Stream: "/v1/support/events", Trigger: "sse:queue", Page: "/support/machine-queue"})
}

// machineLines groups the API's orders (line by line, each in order) into
// lines.
func machineLines(orders []domain.WaitingOrder) consoleMachineQueueData {
	d := consoleMachineQueueData{Waiting: len(orders)}
	for _, o := range orders {
		n := len(d.Lines)
		if n == 0 || d.Lines[n-1].Model != o.Model || d.Lines[n-1].TotalGPUs != o.TotalGPUs {
			d.Lines = append(d.Lines, machineLine{Model: o.Model, TotalGPUs: o.TotalGPUs})
			n++
		}
		d.Lines[n-1].Orders = append(d.Lines[n-1].Orders, waitingRow{WaitingOrder: o, Waited: frenchWait(o.WaitedSeconds)})
	}
	return d
}

// frenchWait says a wait in French: "moins d'une minute", "12 min",
// "2 h 05 min", "3 j 4 h".
func frenchWait(seconds int64) string {
	m := seconds / 60
	switch {
	case m < 1:
		return "moins d'une minute"
	case m < 60:
		return fmt.Sprintf("%d min", m)
	case m < 24*60:
		if m%60 == 0 {
			return fmt.Sprintf("%d h", m/60)
		}
		return fmt.Sprintf("%d h %02d min", m/60, m%60)
	}
	days, hours := m/(24*60), m%(24*60)/60
	if hours == 0 {
		return fmt.Sprintf("%d j", days)
	}
	return fmt.Sprintf("%d j %d h", days, hours)
}
