package main

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A checkpoint is printed once per multiple of -every passed, with the
// count reached (a poll may jump past several), and none at n itself: the
// caller's final line reports that.
func TestFollowCheckpoints(t *testing.T) {
	counts := []int{0, 3, 12, 14, 35, 39, 40, 41}
	i := 0
	count := func(context.Context) (int, error) {
		c := counts[min(i, len(counts)-1)]
		i++
		if c == 14 {
			return 0, errors.New("a failed count is skipped")
		}
		return c, nil
	}
	var got []int
	err := follow(context.Background(), time.Millisecond, 40, 10, count, func(active int) { got = append(got, active) })
	require.NoError(t, err)
	require.Equal(t, []int{12, 35}, got)
	require.Equal(t, 7, i, "follow returns at the first count reaching n")
}

func TestFollowStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := follow(ctx, time.Millisecond, 10, 5, func(context.Context) (int, error) {
		if n++; n == 3 {
			cancel()
		}
		return 1, nil
	}, func(int) { t.Error("no checkpoint below -every") })
	require.ErrorIs(t, err, context.Canceled)
}

// The histogram's quantiles are within its 2 % buckets of the exact ones.
func TestDurationsQuantiles(t *testing.T) {
	var h durations
	require.Zero(t, h.q(.5))
	for ms := 1; ms <= 10000; ms++ {
		h.add(time.Duration(ms) * time.Millisecond)
	}
	h.add(100 * 24 * time.Hour) // past the last bucket: counted there
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{.5, 5000 * time.Millisecond}, {.99, 9900 * time.Millisecond}, {.01, 100 * time.Millisecond}} {
		got := h.q(c.p)
		require.Less(t, math.Abs(float64(got-c.want))/float64(c.want), .02, "q(%v) = %s, want %s", c.p, got, c.want)
	}
	require.Greater(t, h.q(1), 5*time.Hour)
}
