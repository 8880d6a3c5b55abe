package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/memo"
)

// A remembered answer is byte for byte what c.JSON writes, and a changed
// value is encoded again.
func TestAnswerMemoAnswersAsJSONWould(t *testing.T) {
	s := &Server{answers: memo.New[[]byte](memoAnswers)}
	at := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	d := orderDetail{Order: viewOrder(domain.Order{Ref: "KD-MEMO", Status: domain.StatusActive, TotalCents: 311800, PeriodEnd: &at}),
		Timeline: []domain.TimelineEvent{{Kind: domain.EventPaymentConfirmed, Message: "<payé> & confirmé", Data: []byte(`{"a": 1}`)}}}
	answer := func(memoized bool) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		if memoized {
			s.answerMemo(c, "order", d)
		} else {
			c.JSON(http.StatusOK, d)
		}
		return w
	}
	want := answer(false)
	for range 2 {
		got := answer(true)
		require.Equal(t, want.Code, got.Code)
		require.Equal(t, want.Header().Get("Content-Type"), got.Header().Get("Content-Type"))
		require.Equal(t, want.Body.String(), got.Body.String())
	}
	require.Equal(t, 1, s.answers.Len(), "the same value encoded twice")

	later := at.Add(time.Hour)
	d.Order.PeriodEnd = &later // the same pointer field, another time
	want = answer(false)
	require.Equal(t, want.Body.String(), answer(true).Body.String())
	require.Equal(t, 2, s.answers.Len())
}
