package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/secrets"
)

// Provisioner names, as configured (KERNODECK_PROVISIONER): they decide how
// availability is counted.
const (
	ProvisionerLocal = "localpg"
	ProvisionerSSH   = "ssh"
)

// DefaultKeyShowWindow is how long a generated private key stays visible to
// its owner after it was first shown.
const DefaultKeyShowWindow = 10 * time.Minute

// Store is the database with the keyring that opens access secrets, as the
// API uses it. Its Access opens the sealed password; OwnerAccess also opens
// the Jupyter token and hands out a generated private key once.
type Store struct {
	*DB
	Keyring     *secrets.Keyring
	Provisioner string
	// KeyShowWindow: a generated private key is shown from its first
	// display for this long, then erased. The order page refreshes by itself,
	// so a strict "first read only" would lose the key to a refresh the
	// customer never saw; 0 means exactly one read.
	KeyShowWindow time.Duration
}

// NewStore wraps db. keyring may not be nil.
func NewStore(db *DB, keyring *secrets.Keyring, provisioner string) *Store {
	return &Store{DB: db, Keyring: keyring, Provisioner: provisioner, KeyShowWindow: DefaultKeyShowWindow}
}

func (s *Store) openPassword(ref string, a *domain.Access) error {
	if !secrets.IsSealed(a.Password) {
		return nil // written before secrets were sealed (or empty)
	}
	clear, err := s.Keyring.Open(a.Password, "order_access.password:"+ref)
	if err != nil {
		return fmt.Errorf("access %s: %w", ref, err)
	}
	a.Password = clear
	return nil
}

// Access returns the access with its password opened; never the private
// key nor the Jupyter token (support sees this view, minus the password).
func (s *Store) Access(ctx context.Context, ref string) (domain.Access, error) {
	var a domain.Access
	if err := s.GetContext(ctx, &a, `SELECT `+accessColumns+` FROM order_access WHERE order_ref = $1`, ref); err != nil {
		return domain.Access{}, fmt.Errorf("access %s: %w", ref, notFound(err))
	}
	return a, s.openPassword(ref, &a)
}

// OwnerAccess is the access as its owner sees it: password and Jupyter
// token opened, and the generated private key if it was never shown, which
// is erased in the same transaction (shown once).
func (s *Store) OwnerAccess(ctx context.Context, ref string) (domain.Access, error) {
	var a domain.Access
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var sealed struct {
			PrivateKey   sql.NullString `db:"private_key"`
			JupyterToken sql.NullString `db:"jupyter_token"`
			ShownAt      sql.NullTime   `db:"private_key_shown_at"`
			Now          time.Time      `db:"now"`
		}
		if err := tx.QueryRowxContext(ctx, `SELECT private_key, jupyter_token, private_key_shown_at, now() AS now
			FROM order_access WHERE order_ref = $1 FOR UPDATE`, ref).StructScan(&sealed); err != nil {
			return fmt.Errorf("access %s: %w", ref, notFound(err))
		}
		if sealed.PrivateKey.Valid {
			first := !sealed.ShownAt.Valid
			if first || sealed.Now.Sub(sealed.ShownAt.Time) < s.KeyShowWindow {
				key, err := s.Keyring.Open(sealed.PrivateKey.String, "order_access.private_key:"+ref)
				if err != nil {
					return fmt.Errorf("access %s: %w", ref, err)
				}
				a.PrivateKey = key
			}
			// Erase it now when it may be shown only once, or once its
			// window has passed; otherwise only note the first display.
			query := `UPDATE order_access SET private_key_shown_at = COALESCE(private_key_shown_at, now()) WHERE order_ref = $1`
			if s.KeyShowWindow <= 0 || !first && a.PrivateKey == "" {
				query = `UPDATE order_access SET private_key = NULL, private_key_shown_at = COALESCE(private_key_shown_at, now())
					WHERE order_ref = $1`
			}
			if _, err := tx.ExecContext(ctx, query, ref); err != nil {
				return fmt.Errorf("access %s: %w", ref, err)
			}
		}
		if sealed.JupyterToken.Valid {
			tok, err := s.Keyring.Open(sealed.JupyterToken.String, "order_access.jupyter_token:"+ref)
			if err != nil {
				return fmt.Errorf("access %s: %w", ref, err)
			}
			a.JupyterToken = tok
		}
		key := a.PrivateKey
		tok := a.JupyterToken
		if err := tx.GetContext(ctx, &a, `SELECT `+accessColumns+` FROM order_access WHERE order_ref = $1`, ref); err != nil {
			return fmt.Errorf("access %s: %w", ref, err)
		}
		a.PrivateKey, a.JupyterToken = key, tok
		return s.openPassword(ref, &a)
	})
	if err != nil {
		return domain.Access{}, err
	}
	return a, nil
}

// Availability says whether gpus GPUs of model could be sold now
// (Capacity: the same calculation as the check before payment).
func (s *Store) Availability(ctx context.Context, model string, gpus int) (domain.Availability, error) {
	return Capacity{DB: s.DB, Provisioner: s.Provisioner}.Availability(ctx, model, gpus)
}

// CheckFits refuses a configuration no host could ever serve (Capacity).
func (s *Store) CheckFits(ctx context.Context, model string, gpus, gpusPerLot int) error {
	return Capacity{DB: s.DB, Provisioner: s.Provisioner}.CheckFits(ctx, model, gpus, gpusPerLot)
}
