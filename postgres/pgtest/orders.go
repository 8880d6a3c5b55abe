package pgtest

import (
	"database/sql"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// Order is an order a test stores directly (NewOrder), with no workflow
// run: the seed of the machine drivers' tests.
type Order struct {
	AccountID int64
	Model     string
	// Lots and GPUsPerLot: 0 means 1.
	Lots, GPUsPerLot int
	// Preset: "" means python.
	Preset string
	// Status: "" means paid.
	Status string
	// SSHPublicKey is the customer's own key ("": none).
	SSHPublicKey string
}

// NewOrder stores o, for 3 days at 1 USD a lot, and returns its reference.
func NewOrder(t testing.TB, db *postgres.DB, o Order) string {
	t.Helper()
	lots, perLot := max(o.Lots, 1), max(o.GPUsPerLot, 1)
	preset, status := o.Preset, o.Status
	if preset == "" {
		preset = "python"
	}
	if status == "" {
		status = domain.StatusPaid
	}
	var key any
	if o.SSHPublicKey != "" {
		key = o.SSHPublicKey
	}
	ref := domain.NewRef(domain.OrderRefPrefix)
	if _, err := db.Exec(`INSERT INTO orders (ref, account_id, gpu_model, lots, gpus_per_lot, total_gpus,
		duration_days, preset, lot_cents, total_cents, status, workflow_id, ssh_public_key)
		VALUES ($1, $2, $3, $4::int, $5::int, $4::int * $5::int, 3, $6, 100, 100 * $4::int, $7, 'rental-' || $1, $8)`,
		ref, o.AccountID, o.Model, lots, perLot, preset, status, key); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return ref
}

// SetOrderStatus sets the stored order's status, as no workflow would.
func SetOrderStatus(t testing.TB, db *postgres.DB, ref, status string) {
	t.Helper()
	if _, err := db.Exec(`UPDATE orders SET status = $2 WHERE ref = $1`, ref, status); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// StoredAccess is an order's access as stored: secrets sealed.
type StoredAccess struct {
	Password          sql.NullString `db:"password"`
	PrivateKey        sql.NullString `db:"private_key"`
	PrivateKeyShownAt *time.Time     `db:"private_key_shown_at"`
	JupyterURL        sql.NullString `db:"jupyter_url"`
	JupyterToken      sql.NullString `db:"jupyter_token"`
	CUDAVersion       string         `db:"cuda_version"`
	Notes             string         `db:"notes"`
	RevokedAt         *time.Time     `db:"revoked_at"`
}

// Access reads the order's access as stored.
func Access(t testing.TB, db *postgres.DB, ref string) StoredAccess {
	t.Helper()
	var a StoredAccess
	if err := db.Get(&a, `SELECT password, private_key, private_key_shown_at, jupyter_url, jupyter_token,
		COALESCE(cuda_version, '') AS cuda_version, COALESCE(notes, '') AS notes, revoked_at
		FROM order_access WHERE order_ref = $1`, ref); err != nil {
		t.Fatalf("pgtest: access of %s: %v", ref, err)
	}
	return a
}
