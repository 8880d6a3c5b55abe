package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// Failed logins are counted per network and day, apart from the activity:
// however many, from however many networks, the owner's logins and password
// changes stay, and the groups are bounded (the latest 200).
func TestLoginFailuresApartAndBounded(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	a := mkAccount(t, db, "owner@example.com")
	thief := domain.SessionClient{UserAgent: "curl/8.0", IP: "192.0.2.66"}
	require.NoError(t, db.RecordActivity(ctx, a.ID, domain.ActivityLogin, thief))
	require.NoError(t, db.RecordActivity(ctx, a.ID, domain.ActivityPasswordChanged, thief))
	for n := range 210 {
		for range 3 {
			net := fmt.Sprintf("198.51.%d.%d", n/200, n%200)
			require.NoError(t, db.RecordLoginFailure(ctx, a.ID, net, domain.SessionClient{UserAgent: "Firefox/1 Linux", IP: net}))
		}
	}
	entries, groups, failed, err := db.AccountActivity(ctx, a.ID, 500, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, domain.ActivityPasswordChanged, entries[0].Kind)
	require.Equal(t, domain.ActivityLogin, entries[1].Kind)
	require.Equal(t, "192.0.2.66", entries[1].ClientIP)
	require.Len(t, groups, 200, "the latest 200 groups")
	require.Equal(t, 600, failed)
	require.Equal(t, "198.51.1.9", groups[0].Network, "the latest first")
	require.Equal(t, 3, groups[0].Count)
	require.Equal(t, time.Now().UTC().Format(time.DateOnly), groups[0].Day)
	require.Equal(t, "Firefox sur Linux", groups[0].Device)
}
