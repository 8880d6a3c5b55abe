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
// API uses it. Its Access opens the sealed password; OwnerOrder also opens
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

// NewStore wraps db. Without a keyring (nil), sealed secrets are left out
// of what it reads and no private key is revealed.
func NewStore(db *DB, keyring *secrets.Keyring, provisioner string) *Store {
	return &Store{DB: db, Keyring: keyring, Provisioner: provisioner, KeyShowWindow: DefaultKeyShowWindow}
}

func (s *Store) openPassword(ref string, a *domain.Access) error {
	if !secrets.IsSealed(a.Password) {
		return nil // written before secrets were sealed (or empty)
	}
	if s.Keyring == nil {
		a.Password = "" // no keyring: left out
		return nil
	}
	clear, err := AccessPassword.Open(s.Keyring, ref, a.Password)
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

// ownerView completes an access (password opened) as its owner sees it:
// the Jupyter token opened, and whether a generated key (hasKey) can still
// be revealed at the database's time now.
func (s *Store) ownerView(ref string, a *domain.Access, hasKey bool, jupyterToken sql.NullString, now time.Time) error {
	a.PrivateKeyAvailable = hasKey && a.RevokedAt == nil &&
		(a.PrivateKeyShownAt == nil || now.Sub(*a.PrivateKeyShownAt) < s.KeyShowWindow)
	if jupyterToken.Valid {
		tok, err := AccessJupyterToken.Open(s.Keyring, ref, jupyterToken.String)
		if err != nil {
			return fmt.Errorf("access %s: %w", ref, err)
		}
		a.JupyterToken = tok
	}
	return nil
}

// errKeyGone answers a reveal when no generated key can be handed out.
var errKeyGone = &domain.Error{Code: domain.ECodeConflict,
	Message: "La clé privée générée n'est plus disponible : elle n'est remise que pendant quelques minutes après sa première présentation. Contactez le support avec la référence de la commande."}

// RevealPrivateKey hands the generated private key to its owner (the
// caller checked ownership): its first reveal starts KeyShowWindow, during
// which it is handed out again (a lost download); after it, or at once when
// the window is 0, it is erased. Revoked access reveals nothing.
func (s *Store) RevealPrivateKey(ctx context.Context, ref string) (key string, shownAt time.Time, err error) {
	if s.Keyring == nil {
		return "", time.Time{}, errKeyGone
	}
	expired := false
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		var row struct {
			PrivateKey sql.NullString `db:"private_key"`
			ShownAt    sql.NullTime   `db:"private_key_shown_at"`
			Revoked    bool           `db:"revoked"`
			Now        time.Time      `db:"now"`
		}
		if err := tx.QueryRowxContext(ctx, `SELECT private_key, private_key_shown_at, revoked_at IS NOT NULL AS revoked, now() AS now
			FROM order_access WHERE order_ref = $1 FOR UPDATE`, ref).StructScan(&row); err != nil {
			return fmt.Errorf("access %s: %w", ref, notFound(err))
		}
		if !row.PrivateKey.Valid || row.Revoked {
			return errKeyGone
		}
		first := !row.ShownAt.Valid
		inWindow := first || row.Now.Sub(row.ShownAt.Time) < s.KeyShowWindow
		if inWindow {
			k, err := AccessPrivateKey.Open(s.Keyring, ref, row.PrivateKey.String)
			if err != nil {
				return fmt.Errorf("access %s: %w", ref, err)
			}
			key = k
		}
		// Erase it now when it may be shown only once, or once its window
		// has passed; otherwise only note the first reveal.
		query := `UPDATE order_access SET private_key_shown_at = COALESCE(private_key_shown_at, now()) WHERE order_ref = $1
			RETURNING private_key_shown_at`
		if s.KeyShowWindow <= 0 || !inWindow {
			query = `UPDATE order_access SET private_key = NULL, private_key_shown_at = COALESCE(private_key_shown_at, now())
				WHERE order_ref = $1 RETURNING private_key_shown_at`
		}
		if err := tx.GetContext(ctx, &shownAt, query, ref); err != nil {
			return fmt.Errorf("access %s: %w", ref, err)
		}
		expired = !inWindow // erased: committed, then refused
		return nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	if expired {
		return "", time.Time{}, errKeyGone
	}
	return key, shownAt, nil
}

// Availability says whether gpus GPUs of model could be sold now
// (Capacity: the same calculation as the check before payment).
func (s *Store) Availability(ctx context.Context, model string, gpus, gpusPerLot int) (domain.Availability, error) {
	return Capacity{DB: s.DB, Provisioner: s.Provisioner}.Availability(ctx, model, gpus, gpusPerLot)
}

// CheckFits refuses a configuration no host could ever serve (Capacity).
func (s *Store) CheckFits(ctx context.Context, model string, gpus, gpusPerLot int) error {
	return Capacity{DB: s.DB, Provisioner: s.Provisioner}.CheckFits(ctx, model, gpus, gpusPerLot)
}
