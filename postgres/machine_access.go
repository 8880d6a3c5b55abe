package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// NewAccess is the access a machine driver gives an order (order_access),
// written once. Secrets are sealed by the driver (AccessPassword,
// AccessPrivateKey, AccessJupyterToken); "" writes NULL.
type NewAccess struct {
	OrderRef       string
	Host           string
	Port           int
	Username       string
	Password       string
	PrivateKey     string
	KeyFingerprint string
	JupyterURL     string
	JupyterToken   string
	// What the driver's verification saw.
	GPUModel      string
	GPUCount      int
	DriverVersion string
	CUDAVersion   string
	Notes         string
}

// AccessAddress is where the customer logs in.
type AccessAddress struct {
	Host     string
	Port     int
	Username string
}

// insertAccess writes the order's access unless it has one.
func insertAccess(ctx context.Context, q sqlx.ExecerContext, a NewAccess) error {
	if _, err := q.ExecContext(ctx, `
		INSERT INTO order_access (order_ref, host, port, username, password, private_key, key_fingerprint,
			jupyter_url, jupyter_token, gpu_model_seen, gpu_count_seen, driver_version, cuda_version, notes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (order_ref) DO NOTHING`,
		a.OrderRef, a.Host, a.Port, a.Username, nullString(a.Password), nullString(a.PrivateKey),
		nullString(a.KeyFingerprint), nullString(a.JupyterURL), nullString(a.JupyterToken),
		a.GPUModel, a.GPUCount, a.DriverVersion, a.CUDAVersion, a.Notes); err != nil {
		return fmt.Errorf("create access %s: %w", a.OrderRef, err)
	}
	return nil
}

// accessAddress reads back the access the order has (the first written).
func accessAddress(ctx context.Context, db *DB, orderRef string) (AccessAddress, error) {
	var s AccessAddress
	if err := db.QueryRowxContext(ctx, `SELECT host, port, username FROM order_access WHERE order_ref = $1`, orderRef).
		Scan(&s.Host, &s.Port, &s.Username); err != nil {
		return AccessAddress{}, fmt.Errorf("read access %s: %w", orderRef, err)
	}
	return s, nil
}

// orderPublicKey is the customer's own SSH public key on the order ("":
// none given).
func orderPublicKey(ctx context.Context, db *DB, orderRef string) (string, error) {
	var key sql.NullString
	if err := db.GetContext(ctx, &key, `SELECT ssh_public_key FROM orders WHERE ref = $1`, orderRef); err != nil {
		return "", fmt.Errorf("order %s: %w", orderRef, err)
	}
	return key.String, nil
}
