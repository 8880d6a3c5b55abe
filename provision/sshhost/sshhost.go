// Package sshhost is the provisioning driver for real GPU hosts, driven over
// SSH (golang.org/x/crypto/ssh) from an inventory in PostgreSQL (gpu_hosts).
//
// An order takes one whole host whose GPU model and count are the order's.
// Every step is an activity that may be retried after a crash at any line:
// database writes are keyed on the order, secrets are generated once and
// stored sealed, and the remote scripts (scripts/*.sh, embedded) are
// idempotent and serialised per account with flock on the host.
//
// Host keys are always checked against the fingerprint in the inventory. A
// host that shows another key, or other GPUs than it should, is marked
// broken and its reservation dropped, and the step fails without retry: the
// workflow's next provisioning attempt reserves another host.
package sshhost

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"go.temporal.io/sdk/activity"
	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/accesskey"
	"github.com/kernodeck/kernodeck/secrets"
)

var (
	//go:embed scripts/common.sh
	commonScript string
	//go:embed scripts/prepare.sh
	prepareScript string
	//go:embed scripts/teardown.sh
	teardownScript string
	//go:embed scripts/setkey.sh
	setkeyScript string
)

// Defaults for the zero fields of Driver.
const (
	DefaultUserPrefix     = "kd-"
	DefaultScratchDir     = "/var/lib/kernodeck/scratch"
	DefaultJupyterPort    = 8888
	DefaultConnectTimeout = 15 * time.Second
)

// ErrTypeHostRefused is the error code of a step refused because the host
// is not trustworthy (host key mismatch): like a verification mismatch, the
// host is set aside and the next attempt takes another one.
const ErrTypeHostRefused = "host_refused"

// Driver implements activities.Provisioner on SSH hosts.
type Driver struct {
	DB      *sqlx.DB
	Keyring *secrets.Keyring
	// Signer is the admin key the driver logs in to hosts with.
	Signer ssh.Signer
	// AdminUser is the login on hosts ("root"; another user needs
	// passwordless sudo).
	AdminUser string
	// UserPrefix starts every customer account's name ("kd-").
	UserPrefix string
	// ScratchDir holds one scratch directory per customer, wiped at the end.
	ScratchDir     string
	JupyterPort    int
	ConnectTimeout time.Duration
	Logger         *slog.Logger
	// OnStep, if set, is told each step a remote script reaches (tests use
	// it to kill a worker mid-script).
	OnStep func(orderRef, step string)
}

var _ activities.Provisioner = (*Driver)(nil)

func (d *Driver) adminUser() string {
	if d.AdminUser == "" {
		return "root"
	}
	return d.AdminUser
}

func (d *Driver) connectTimeout() time.Duration {
	if d.ConnectTimeout <= 0 {
		return DefaultConnectTimeout
	}
	return d.ConnectTimeout
}

func (d *Driver) scratchDir() string {
	if d.ScratchDir == "" {
		return DefaultScratchDir
	}
	return d.ScratchDir
}

func (d *Driver) jupyterPort() int {
	if d.JupyterPort <= 0 {
		return DefaultJupyterPort
	}
	return d.JupyterPort
}

func (d *Driver) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.Default()
	}
	return d.Logger
}

var unixUserRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// UnixUser is the account name of an order on its host: derived from the
// reference, so every retry and every teardown names the same account.
func (d *Driver) UnixUser(orderRef string) (string, error) {
	prefix := d.UserPrefix
	if prefix == "" {
		prefix = DefaultUserPrefix
	}
	_, suffix, _ := strings.Cut(orderRef, "-")
	u := prefix + strings.ToLower(suffix)
	if !unixUserRE.MatchString(u) {
		return "", fmt.Errorf("order %s gives no valid account name (%q)", orderRef, u)
	}
	return u, nil
}

// reservation is an order's active hold on a host, with the host.
type reservation struct {
	ID         int64          `db:"id"`
	OrderRef   string         `db:"order_ref"`
	UnixUser   string         `db:"unix_user"`
	PrivateKey sql.NullString `db:"private_key"`
	PublicKey  sql.NullString `db:"public_key"`
	JupyterTok sql.NullString `db:"jupyter_token"`
	// PresetCheck is what the preset's check found (French, for the order).
	PresetCheck sql.NullString `db:"preset_check"`
	// UID and SubIDs are the account's uid on the host and its subordinate
	// ranges ("first:count ..."), as prepare reported them.
	UID    sql.NullInt64 `db:"unix_uid"`
	SubIDs string        `db:"sub_ids"`
	host
}

const reservationQuery = `
	SELECT r.id, r.order_ref, r.unix_user, r.private_key, r.public_key, r.jupyter_token, r.preset_check,
		r.unix_uid, r.sub_ids, h.id, h.name, h.address, h.ssh_port, h.host_key_fingerprint, h.host_key_type,
		h.gpu_model, h.gpu_count, h.state
	FROM host_reservations r JOIN gpu_hosts h ON h.id = r.host_id
	WHERE r.order_ref = $1 AND r.state = 'active'`

func (d *Driver) activeReservation(ctx context.Context, q sqlx.QueryerContext, orderRef string) (reservation, bool, error) {
	var r reservation
	err := q.QueryRowxContext(ctx, reservationQuery, orderRef).Scan(&r.ID, &r.OrderRef, &r.UnixUser,
		&r.PrivateKey, &r.PublicKey, &r.JupyterTok, &r.PresetCheck, &r.UID, &r.SubIDs, &r.host.ID, &r.Name, &r.Address, &r.Port,
		&r.Fingerprint, &r.KeyType, &r.GPUModel, &r.GPUCount, &r.State)
	if errors.Is(err, sql.ErrNoRows) {
		return reservation{}, false, nil
	}
	if err != nil {
		return reservation{}, false, fmt.Errorf("reservation of %s: %w", orderRef, err)
	}
	return r, true, nil
}

// Reserve takes a free host with exactly the order's GPUs: the host the
// order holds since its payment request if it has one (postgres.Capacity),
// else a free host no other order holds. Decisions on a model's capacity are
// serialised (postgres.LockCapacity), and unique indexes allow one active
// reservation per order and per host, so two orders never share a machine.
// A second call for the same order keeps its host. No free host: a
// non-retryable no_capacity error (the order waits for support).
func (d *Driver) Reserve(ctx context.Context, in activities.ReserveInput) error {
	user, err := d.UnixUser(in.OrderRef)
	if err != nil {
		return err
	}
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, ok, err := d.activeReservation(ctx, tx, in.OrderRef); err != nil || ok {
			return err
		}
		if err := postgres.LockCapacity(ctx, tx, in.GPUModel); err != nil {
			return err
		}
		held, _, err := postgres.HeldHost(ctx, tx, in.OrderRef)
		if err != nil {
			return err
		}
		var h struct {
			ID   int64
			Name string
		}
		var found bool
		h.ID, h.Name, found, err = postgres.FreeHost(ctx, tx, in.GPUModel, in.GPUs, in.OrderRef, held)
		if err != nil {
			return fmt.Errorf("pick host: %w", err)
		}
		if !found {
			return domain.Errorf(domain.ECodeNoCapacity,
				"Aucune machine libre avec %d GPU %s pour le moment.", in.GPUs, in.GPUModel)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO host_reservations (order_ref, host_id, host_name, unix_user, state)
			VALUES ($1, $2, $3, $4, 'active')`, in.OrderRef, h.ID, h.Name, user); err != nil {
			return fmt.Errorf("reserve %s for %s: %w", h.Name, in.OrderRef, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'reserved', updated_at = now() WHERE id = $1`, h.ID); err != nil {
			return fmt.Errorf("mark %s reserved: %w", h.Name, err)
		}
		if err := postgres.ConsumeHold(ctx, tx, in.OrderRef); err != nil {
			return err
		}
		d.logger().Info("host reserved", "order", in.OrderRef, "host", h.Name, "held", held == h.ID)
		return nil
	})
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" {
		// A concurrent attempt for the same order won the race: retrying
		// finds its reservation.
		return fmt.Errorf("reserve %s: concurrent reservation, retry: %w", in.OrderRef, err)
	}
	return err
}

// setAside marks the host broken and fails the order's reservation, so the
// next Reserve picks another host. The customer's account and scratch space,
// if any, are removed first (best effort: the host is out of service anyway).
func (d *Driver) setAside(ctx context.Context, r reservation, reason string, seen *gpuSeen, cleanup bool) error {
	if cleanup {
		if _, err := d.teardown(ctx, r, "release"); err != nil {
			d.logger().Warn("cleanup on a host set aside failed", "host", r.Name, "order", r.OrderRef, "err", err)
		}
	}
	var model, drv, cuda any
	var count any
	if seen != nil {
		model, count, drv, cuda = seen.model(), len(seen.Names), seen.Driver, seen.CUDA
	}
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET state = 'failed', failure = $2,
			gpu_model_seen = $3, gpu_count_seen = $4, driver_version = $5, cuda_version = $6, released_at = now()
			WHERE id = $1 AND state = 'active'`, r.ID, reason, model, count, drv, cuda); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
			r.host.ID, fmt.Sprintf("%s (commande %s, %s)", reason, r.OrderRef, time.Now().UTC().Format(time.RFC3339)))
		return err
	})
	if err != nil {
		return fmt.Errorf("set host %s aside: %w", r.Name, err)
	}
	d.logger().Error("host set aside as broken", "host", r.Name, "order", r.OrderRef, "reason", reason)
	return nil
}

// connect dials the reserved host. A host key mismatch sets the host aside
// and returns a non-retryable refusal.
func (d *Driver) connect(ctx context.Context, r reservation) (*ssh.Client, func(), error) {
	client, closeFn, err := d.dial(ctx, r.host)
	var mismatch *HostKeyMismatchError
	if errors.As(err, &mismatch) {
		if aerr := d.setAside(ctx, r, "clé d'hôte SSH inattendue : "+mismatch.Got, nil, false); aerr != nil {
			return nil, nil, aerr
		}
		return nil, nil, domain.Errorf(ErrTypeHostRefused,
			"La machine %s n'a pas présenté la clé SSH attendue : elle est écartée, une autre sera réservée.", r.Name)
	}
	return client, closeFn, err
}

func (d *Driver) step(ctx context.Context, orderRef string) func(string) {
	return func(step string) {
		d.logger().Debug("remote step", "order", orderRef, "step", step)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, step)
		}
		if d.OnStep != nil {
			d.OnStep(orderRef, step)
		}
	}
}

// ensureSecrets generates the order's key pair (when the customer gave no
// public key) and Jupyter token once, stores them sealed on the reservation
// and returns the public key to install and the token. A retry finds them.
func (d *Driver) ensureSecrets(ctx context.Context, r reservation, customerKey, preset string) (pubKey, jupyterToken string, err error) {
	if customerKey == "" && !r.PublicKey.Valid {
		priv, pub, err := accesskey.New(accesskey.Comment(r.OrderRef))
		if err != nil {
			return "", "", fmt.Errorf("generate key pair: %w", err)
		}
		if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET private_key = $2, public_key = $3
			WHERE id = $1 AND public_key IS NULL`, r.ID, postgres.ReservationPrivateKey.Seal(d.Keyring, r.OrderRef, priv), pub); err != nil {
			return "", "", fmt.Errorf("store key pair: %w", err)
		}
	}
	if preset == "notebook" && !r.JupyterTok.Valid {
		var b [24]byte
		_, _ = rand.Read(b[:])
		if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET jupyter_token = $2
			WHERE id = $1 AND jupyter_token IS NULL`, r.ID, postgres.ReservationJupyterToken.Seal(d.Keyring, r.OrderRef, hex.EncodeToString(b[:]))); err != nil {
			return "", "", fmt.Errorf("store jupyter token: %w", err)
		}
	}
	// Read back what won: a concurrent or earlier attempt may have written first.
	var pub, tok sql.NullString
	if err := d.DB.QueryRowxContext(ctx, `SELECT public_key, jupyter_token FROM host_reservations WHERE id = $1`, r.ID).
		Scan(&pub, &tok); err != nil {
		return "", "", fmt.Errorf("read secrets: %w", err)
	}
	pubKey = customerKey
	if pubKey == "" {
		pubKey = pub.String
	}
	if tok.Valid {
		if jupyterToken, err = postgres.ReservationJupyterToken.Open(d.Keyring, r.OrderRef, tok.String); err != nil {
			return "", "", err
		}
	}
	return pubKey, jupyterToken, nil
}

// Prepare creates the customer's account, installs their public key (theirs
// or a generated one) and lays out the preset.
func (d *Driver) Prepare(ctx context.Context, in activities.PrepareInput) error {
	r, ok, err := d.activeReservation(ctx, d.DB, in.OrderRef)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("prepare %s: no active host reservation", in.OrderRef)
	}
	var customerKey sql.NullString
	if err := d.DB.GetContext(ctx, &customerKey, `SELECT ssh_public_key FROM orders WHERE ref = $1`, in.OrderRef); err != nil {
		return fmt.Errorf("order %s: %w", in.OrderRef, err)
	}
	pubKey, token, err := d.ensureSecrets(ctx, r, customerKey.String, in.Preset)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", in.OrderRef, err)
	}
	// Customer uids are never given twice on a host: prepare takes the next
	// one above its own counter and above every uid recorded here.
	var floor int64
	if err := d.DB.GetContext(ctx, &floor, `SELECT COALESCE(max(unix_uid) + 1, 0) FROM host_reservations
		WHERE host_id = $1`, r.host.ID); err != nil {
		return fmt.Errorf("prepare %s: uids of %s: %w", in.OrderRef, r.Name, err)
	}
	vendor, err := d.vendor(ctx, r.GPUModel)
	if err != nil {
		return err
	}
	client, closeFn, err := d.connect(ctx, r)
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := d.runScript(ctx, client, prepareScript, [][2]string{
		{"KD_USER", r.UnixUser}, {"KD_ORDER", in.OrderRef}, {"KD_PUBKEY", pubKey},
		{"KD_PRESET", in.Preset}, {"KD_SCRATCH", d.scratchDir()}, {"KD_JUPYTER_TOKEN", token},
		{"KD_JUPYTER_PORT", fmt.Sprint(d.jupyterPort())}, {"KD_HOST", r.Address},
		{"KD_UID_FLOOR", fmt.Sprint(floor)}, {"KD_GPU_VENDOR", vendor},
	}, d.step(ctx, in.OrderRef))
	if err != nil {
		return fmt.Errorf("prepare %s on %s: %w", in.OrderRef, r.Name, err)
	}
	if !hasLine(res.Stdout, "KD_PREPARE_OK "+res.Tag) {
		return fmt.Errorf("prepare %s on %s: script ended early", in.OrderRef, r.Name)
	}
	uid, subIDs, ok := parseIDs(res.Stdout)
	if !ok {
		return fmt.Errorf("prepare %s on %s: the account's uid was not reported", in.OrderRef, r.Name)
	}
	// The ranges recorded stay recorded: a release searches every one.
	if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET prepared_at = COALESCE(prepared_at, now()),
		preset_check = $2, unix_uid = $3, sub_ids = $4 WHERE id = $1`, r.ID, presetCheck(res.Stdout), uid,
		mergeIDs(r.SubIDs, subIDs)); err != nil {
		return fmt.Errorf("prepare %s: %w", in.OrderRef, err)
	}
	return nil
}

// vendor is the GPU vendor of a catalog model (nvidia or amd).
func (d *Driver) vendor(ctx context.Context, model string) (string, error) {
	var v string
	if err := d.DB.GetContext(ctx, &v, `SELECT vendor FROM gpu_models WHERE model = $1`, model); err != nil {
		return "", fmt.Errorf("model %s: %w", model, err)
	}
	return v, nil
}

var idsLineRE = regexp.MustCompile(`^KD_IDS ([0-9]+) [0-9]+((?: [0-9]+ [0-9]+)*) ?$`)

// parseIDs reads prepare's "KD_IDS uid gid [first count]..." line: the
// account's uid and its subordinate ranges as "first:count ...".
func parseIDs(stdout string) (uid int64, subIDs string, ok bool) {
	for _, line := range strings.Split(stdout, "\n") {
		m := idsLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, err := fmt.Sscan(m[1], &uid); err != nil {
			return 0, "", false
		}
		f := strings.Fields(m[2])
		var ranges []string
		for i := 0; i+1 < len(f); i += 2 {
			ranges = append(ranges, f[i]+":"+f[i+1])
		}
		return uid, strings.Join(ranges, " "), true
	}
	return 0, "", false
}

// mergeIDs joins two "first:count ..." lists without repeating a range.
func mergeIDs(a, b string) string {
	var out []string
	for _, r := range strings.Fields(a + " " + b) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return strings.Join(out, " ")
}

// presetCheck turns the preset check's "KD_PRESET_CHECK ok|fail|absent
// detail" line into the French note for the order (nil: the preset has no
// check). The detail comes from the customer's side of the host: control
// characters are dropped and its length bounded.
func presetCheck(stdout string) any {
	for _, line := range strings.Split(stdout, "\n") {
		rest, ok := strings.CutPrefix(line, "KD_PRESET_CHECK ")
		if !ok {
			continue
		}
		verdict, detail, _ := strings.Cut(rest, " ")
		detail = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, detail)
		if len(detail) > 300 {
			detail = detail[:300]
		}
		switch verdict {
		case "ok":
			return "Contrôle PyTorch réussi (~/kernodeck/check_torch.py) : " + detail + "."
		case "fail":
			return "Contrôle PyTorch en échec : PyTorch ne voit pas le GPU (" + detail + ")."
		default:
			return "PyTorch n'est pas installé sur l'image de la machine : contrôle non exécuté (~/kernodeck/check_torch.py le fera avec votre interpréteur)."
		}
	}
	return nil
}

// Verify reads the GPUs with nvidia-smi. Another model or count than the
// order's sets the host aside and fails without retry.
func (d *Driver) Verify(ctx context.Context, in activities.VerifyInput) (activities.Verification, error) {
	r, ok, err := d.activeReservation(ctx, d.DB, in.OrderRef)
	if err != nil {
		return activities.Verification{}, err
	}
	if !ok {
		// A retry after this very step set the host aside: say it again.
		var failure sql.NullString
		_ = d.DB.GetContext(ctx, &failure, `SELECT failure FROM host_reservations WHERE order_ref = $1
			ORDER BY id DESC LIMIT 1`, in.OrderRef)
		if failure.Valid {
			return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
				"La machine ne correspond pas à la commande (%s) : elle est écartée, une autre sera réservée.", failure.String)
		}
		return activities.Verification{}, fmt.Errorf("verify %s: no active host reservation", in.OrderRef)
	}
	var m struct {
		Pattern sql.NullString `db:"smi_name_pattern"`
		Vendor  string         `db:"vendor"`
	}
	if err := d.DB.GetContext(ctx, &m, `SELECT smi_name_pattern, vendor FROM gpu_models WHERE model = $1`, in.GPUModel); err != nil {
		return activities.Verification{}, fmt.Errorf("model %s: %w", in.GPUModel, err)
	}
	pattern := m.Pattern
	if !pattern.Valid {
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"Le modèle %s ne peut pas être vérifié (aucun nom attendu de nvidia-smi, amd-smi ou rocm-smi).", in.GPUModel)
	}
	// NVIDIA GPUs are read with nvidia-smi, AMD ones with amd-smi, or
	// rocm-smi where an older ROCm has no amd-smi.
	script, parse := verifyScript, parseVerify
	if m.Vendor == "amd" {
		script, parse = amdVerifyScript, parseAMDVerify
	}
	re, err := regexp.Compile("(?i)" + pattern.String)
	if err != nil {
		return activities.Verification{}, fmt.Errorf("smi_name_pattern of %s: %w", in.GPUModel, err)
	}
	client, closeFn, err := d.connect(ctx, r)
	if err != nil {
		return activities.Verification{}, err
	}
	defer closeFn()
	out, err := d.run(ctx, client, script)
	if err != nil {
		return activities.Verification{}, fmt.Errorf("verify %s on %s: %w", in.OrderRef, r.Name, err)
	}
	seen, err := parse(out)
	if err != nil {
		return activities.Verification{}, fmt.Errorf("verify %s on %s: %w", in.OrderRef, r.Name, err)
	}
	if why := seen.mismatch(re, in.GPUModel, in.GPUs); why != "" {
		closeFn() // the cleanup below opens its own connection
		if err := d.setAside(ctx, r, "vérification : "+why, &seen, true); err != nil {
			return activities.Verification{}, err
		}
		return activities.Verification{}, domain.Errorf(activities.ErrTypeVerifyMismatch,
			"La machine ne correspond pas à la commande (%s) : elle est écartée, une autre sera réservée.", why)
	}
	if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET gpu_model_seen = $2, gpu_count_seen = $3,
		driver_version = $4, cuda_version = $5 WHERE id = $1`, r.ID, seen.model(), len(seen.Names), seen.Driver, seen.CUDA); err != nil {
		return activities.Verification{}, fmt.Errorf("record verification of %s: %w", in.OrderRef, err)
	}
	return activities.Verification{
		GPUModel:      seen.model(),
		GPUCount:      len(seen.Names),
		DriverVersion: seen.Driver,
		CUDAVersion:   seen.CUDA,
		Notes:         seen.notes(r.Name),
	}, nil
}

// CreateAccess writes the order's access information once: the host, the
// account, the generated private key (sealed, shown once to the owner) and
// the Jupyter URL and token for the notebook preset.
func (d *Driver) CreateAccess(ctx context.Context, in activities.CreateAccessInput) (activities.AccessSummary, error) {
	r, ok, err := d.activeReservation(ctx, d.DB, in.OrderRef)
	if err != nil {
		return activities.AccessSummary{}, err
	}
	if !ok {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: no active host reservation", in.OrderRef)
	}
	var privKey, fingerprint, jupyterURL, jupyterTok any
	if r.PrivateKey.Valid {
		pem, err := postgres.ReservationPrivateKey.Open(d.Keyring, in.OrderRef, r.PrivateKey.String)
		if err != nil {
			return activities.AccessSummary{}, err
		}
		privKey = postgres.AccessPrivateKey.Seal(d.Keyring, in.OrderRef, pem)
	}
	var customerKey sql.NullString
	if err := d.DB.GetContext(ctx, &customerKey, `SELECT ssh_public_key FROM orders WHERE ref = $1`, in.OrderRef); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("order %s: %w", in.OrderRef, err)
	}
	pubLine := customerKey.String
	if pubLine == "" {
		pubLine = r.PublicKey.String
	}
	if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pubLine)); err == nil {
		fingerprint = ssh.FingerprintSHA256(pk)
	}
	if r.JupyterTok.Valid {
		tok, err := postgres.ReservationJupyterToken.Open(d.Keyring, in.OrderRef, r.JupyterTok.String)
		if err != nil {
			return activities.AccessSummary{}, err
		}
		jupyterTok = postgres.AccessJupyterToken.Seal(d.Keyring, in.OrderRef, tok)
		jupyterURL = fmt.Sprintf("http://127.0.0.1:%d/lab", d.jupyterPort())
	}
	v := in.Verification
	if r.PresetCheck.Valid {
		v.Notes = strings.TrimSpace(v.Notes + " " + r.PresetCheck.String)
	}
	if jupyterURL != nil {
		v.Notes = strings.TrimSpace(v.Notes + " " + jupyterTunnelNote(r, d.jupyterPort()))
	}
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO order_access (order_ref, host, port, username, password, private_key, key_fingerprint,
				jupyter_url, jupyter_token, gpu_model_seen, gpu_count_seen, driver_version, cuda_version, notes)
			VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (order_ref) DO NOTHING`,
			in.OrderRef, r.Address, r.Port, r.UnixUser, privKey, fingerprint, jupyterURL, jupyterTok,
			v.GPUModel, v.GPUCount, v.DriverVersion, v.CUDAVersion, v.Notes); err != nil {
			return fmt.Errorf("create access %s: %w", in.OrderRef, err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'in_use', updated_at = now()
			WHERE id = $1 AND state = 'reserved'`, r.host.ID)
		return err
	})
	if err != nil {
		return activities.AccessSummary{}, err
	}
	// The generated private key now lives (sealed) on the access only.
	if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET private_key = NULL WHERE id = $1`, r.ID); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("create access %s: %w", in.OrderRef, err)
	}
	var s activities.AccessSummary
	if err := d.DB.QueryRowxContext(ctx, `SELECT host, port, username FROM order_access WHERE order_ref = $1`, in.OrderRef).
		Scan(&s.Host, &s.Port, &s.Username); err != nil {
		return activities.AccessSummary{}, fmt.Errorf("read access %s: %w", in.OrderRef, err)
	}
	return s, nil
}

// jupyterTunnelNote tells the customer how to reach Jupyter, which listens
// on the host's loopback only.
func jupyterTunnelNote(r reservation, port int) string {
	return fmt.Sprintf("Jupyter écoute sur 127.0.0.1 de la machine seulement : ouvrez le tunnel "+
		"« ssh -N -L %d:127.0.0.1:%d -p %d %s@%s » puis ouvrez http://127.0.0.1:%d/lab avec le jeton.",
		port, port, r.Port, r.UnixUser, r.Address, port)
}

// teardownResult is what teardown.sh reported.
type teardownResult struct {
	// Dirty lists what could not be cleaned (empty: the host is clean).
	Dirty []string
	// Customer lists what the customer did to make the host dirty.
	Customer []string
	// Reboot, when set, says only a reboot can clean the host.
	Reboot string
	// GPUReset is the outcome of the GPU reset ("" when none was tried).
	GPUReset string
}

// reason is the host's note for a dirty teardown.
func (t teardownResult) reason() string {
	if len(t.Dirty) == 0 {
		return ""
	}
	s := "nettoyage incomplet : " + strings.Join(t.Dirty, " ; ")
	if t.Reboot != "" {
		s += " ; " + t.Reboot
	}
	if len(t.Customer) > 0 {
		s += " ; du fait du client : " + strings.Join(t.Customer, " ; ")
	}
	return s
}

// teardown runs teardown.sh for the reservation's account and returns what
// it reported. Only lines root prints reach the driver (customer helpers
// never get the script's output), and the verdict must carry the run's tag
// and count the KD_DIRTY lines it follows: a verdict missing, untagged or
// miscounted is not a clean host.
func (d *Driver) teardown(ctx context.Context, r reservation, mode string) (teardownResult, error) {
	vendor, err := d.vendor(ctx, r.GPUModel)
	if err != nil {
		return teardownResult{}, err
	}
	ids := ""
	if r.UID.Valid {
		ids = fmt.Sprintf("%d:%d %s", r.UID.Int64, r.UID.Int64, r.SubIDs)
	}
	client, closeFn, err := d.connect(ctx, r)
	if err != nil {
		return teardownResult{}, err
	}
	defer closeFn()
	res, err := d.runScript(ctx, client, teardownScript, [][2]string{
		{"KD_USER", r.UnixUser}, {"KD_SCRATCH", d.scratchDir()}, {"KD_MODE", mode},
		{"KD_IDS", strings.TrimSpace(ids)}, {"KD_GPU_VENDOR", vendor},
	}, d.step(ctx, r.OrderRef))
	if err != nil {
		return teardownResult{}, fmt.Errorf("%s %s on %s: %w", mode, r.OrderRef, r.Name, err)
	}
	out := parseTeardown(res)
	if out == nil {
		return teardownResult{}, fmt.Errorf("%s %s on %s: script ended early", mode, r.OrderRef, r.Name)
	}
	// Ranges the account got after prepare: recorded, so a later repair
	// searches them even if the host lost its own record.
	if uid, sub, ok := parseIDs(res.Stdout); ok {
		if _, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET unix_uid = COALESCE(unix_uid, $2), sub_ids = $3
			WHERE id = $1`, r.ID, uid, mergeIDs(r.SubIDs, sub)); err != nil {
			return teardownResult{}, fmt.Errorf("%s %s: record ids: %w", mode, r.OrderRef, err)
		}
	}
	if len(out.Dirty) > 0 {
		d.logger().Warn("host not clean after "+mode, "host", r.Name, "order", r.OrderRef, "left", out.Dirty)
	}
	if len(out.Customer) > 0 {
		d.logger().Warn("customer made the host dirty", "host", r.Name, "order", r.OrderRef, "what", out.Customer)
	}
	return *out, nil
}

// parseTeardown reads teardown.sh's output; nil when it has no verdict of
// this run.
func parseTeardown(res scriptResult) *teardownResult {
	var t teardownResult
	verdict := ""
	for _, line := range strings.Split(res.Stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "KD_DIRTY "); ok {
			t.Dirty = append(t.Dirty, v)
		} else if v, ok := strings.CutPrefix(line, "KD_CUSTOMER "); ok {
			t.Customer = append(t.Customer, v)
		} else if v, ok := strings.CutPrefix(line, "KD_REBOOT "); ok {
			t.Reboot = "redémarrage nécessaire : " + v
		} else if v, ok := strings.CutPrefix(line, "KD_GPU_RESET "); ok {
			t.GPUReset = v
		} else if line == "KD_TEARDOWN_OK "+res.Tag || strings.HasPrefix(line, "KD_TEARDOWN_DIRTY "+res.Tag+" ") {
			verdict = line
		}
	}
	switch {
	case verdict == "":
		return nil
	case verdict == "KD_TEARDOWN_OK "+res.Tag:
		if len(t.Dirty) > 0 {
			t.Dirty = append(t.Dirty, "rapport de nettoyage incohérent (propre et sale à la fois)")
		}
	default:
		n := strings.TrimPrefix(verdict, "KD_TEARDOWN_DIRTY "+res.Tag+" ")
		if n != fmt.Sprint(len(t.Dirty)) || len(t.Dirty) == 0 {
			t.Dirty = append(t.Dirty, fmt.Sprintf("rapport de nettoyage illisible (%s raisons annoncées, %d lues)", n, len(t.Dirty)))
		}
	}
	return &t
}

// RevokeAccess stops the customer's processes and removes the account and
// its files, then marks the access revoked.
func (d *Driver) RevokeAccess(ctx context.Context, orderRef string) error {
	r, ok, err := d.activeReservation(ctx, d.DB, orderRef)
	if err != nil {
		return err
	}
	if ok {
		// What could not be cleaned is checked again, and acted on, by
		// Release; what the customer did is kept for it.
		t, err := d.teardown(ctx, r, "revoke")
		if err != nil {
			return err
		}
		if err := d.flagCustomer(ctx, r.ID, t.Customer); err != nil {
			return fmt.Errorf("revoke %s: %w", orderRef, err)
		}
	}
	if _, err := d.DB.ExecContext(ctx, `UPDATE order_access SET revoked_at = now(), private_key = NULL, jupyter_token = NULL
		WHERE order_ref = $1 AND revoked_at IS NULL`, orderRef); err != nil {
		return fmt.Errorf("revoke %s: %w", orderRef, err)
	}
	return nil
}

// Release wipes what the customer left, checks the host is clean and gives
// it back: available again, unless an operator drained it or it broke. A
// host that could not be cleaned is marked broken with the reasons (shown to
// operators by `kernodeck hosts list`), and the order's release still ends:
// the host is out of rotation, the customer's access is closed.
func (d *Driver) Release(ctx context.Context, orderRef string) error {
	r, ok, err := d.activeReservation(ctx, d.DB, orderRef)
	if err != nil || !ok {
		return err
	}
	t, err := d.teardown(ctx, r, "release")
	if err != nil {
		return err
	}
	if err := d.flagCustomer(ctx, r.ID, t.Customer); err != nil {
		return fmt.Errorf("release %s: %w", orderRef, err)
	}
	return postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		var failure any
		if reason := t.reason(); reason != "" {
			failure = reason
		}
		var flag sql.NullString
		if err := tx.QueryRowxContext(ctx, `UPDATE host_reservations SET state = 'released', released_at = now(),
			private_key = NULL, jupyter_token = NULL, failure = COALESCE($2::text, failure),
			cleaned_at = CASE WHEN $2::text IS NULL THEN now() END WHERE id = $1 AND state = 'active'
			RETURNING customer_flag`, r.ID, failure).Scan(&flag); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil // released meanwhile
			}
			return fmt.Errorf("release %s: %w", orderRef, err)
		}
		if failure != nil && flag.Valid && !strings.Contains(failure.(string), "du fait du client") {
			failure = failure.(string) + " ; du fait du client : " + flag.String
		}
		if err := recordGPUReset(ctx, tx, r.host.ID, t.GPUReset); err != nil {
			return fmt.Errorf("release %s: %w", orderRef, err)
		}
		if failure != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET state = 'broken', note = $2, updated_at = now() WHERE id = $1`,
				r.host.ID, fmt.Sprintf("%s (commande %s, %s)", failure, r.OrderRef, time.Now().UTC().Format(time.RFC3339))); err != nil {
				return fmt.Errorf("release %s: %w", orderRef, err)
			}
			d.logger().Error("host set aside as broken: not clean after release", "host", r.Name, "order", orderRef,
				"left", t.Dirty, "customer", t.Customer)
			return nil
		}
		// Clean, but the customer had made it dirty (and the teardown undid
		// it): support is told on the host's record and the reservation.
		note := ""
		if flag.Valid {
			note = fmt.Sprintf("remise en service automatique ; le client de la commande %s avait sali la machine : %s (%s)",
				r.OrderRef, flag.String, time.Now().UTC().Format(time.RFC3339))
			d.logger().Error("customer made the host dirty; cleaned", "host", r.Name, "order", orderRef, "what", flag.String)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET updated_at = now(),
			note = CASE WHEN $2 <> '' THEN $2 ELSE note END,
			state = CASE WHEN state IN ('reserved', 'in_use') THEN 'available' ELSE state END
			WHERE id = $1`, r.host.ID, note); err != nil {
			return fmt.Errorf("release %s: %w", orderRef, err)
		}
		d.logger().Info("host released", "order", orderRef, "host", r.Name, "gpu_reset", t.GPUReset)
		return nil
	})
}

// flagCustomer adds what the customer did to make their host dirty to the
// reservation's record (support reads it there, in the host's note and in
// its queue until an agent closes it: new text opens it again).
func (d *Driver) flagCustomer(ctx context.Context, reservationID int64, what []string) error {
	if len(what) == 0 {
		return nil
	}
	_, err := d.DB.ExecContext(ctx, `UPDATE host_reservations SET customer_flag =
		CASE WHEN customer_flag IS NULL OR customer_flag = '' THEN $2 ELSE customer_flag || ' ; ' || $2 END,
		customer_flag_at = COALESCE(customer_flag_at, now()), customer_flag_closed_at = NULL, customer_flag_closed_by = NULL
		WHERE id = $1 AND (customer_flag IS NULL OR strpos(customer_flag, $2) = 0)`, reservationID, strings.Join(what, " ; "))
	return err
}

// recordGPUReset writes the outcome of a release's GPU reset on the host.
func recordGPUReset(ctx context.Context, tx *sqlx.Tx, hostID int64, outcome string) error {
	if outcome == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE gpu_hosts SET gpu_reset = $2, gpu_reset_at = now() WHERE id = $1`, hostID, outcome)
	return err
}

// runningReservation is the order's reservation once its access exists:
// keys are changed on running rentals only.
func (d *Driver) runningReservation(ctx context.Context, orderRef string) (reservation, error) {
	r, ok, err := d.activeReservation(ctx, d.DB, orderRef)
	if err != nil {
		return reservation{}, err
	}
	var access bool
	if ok {
		if err := d.DB.GetContext(ctx, &access, `SELECT EXISTS (SELECT 1 FROM order_access
			WHERE order_ref = $1 AND revoked_at IS NULL)`, orderRef); err != nil {
			return reservation{}, fmt.Errorf("access of %s: %w", orderRef, err)
		}
	}
	if !access {
		return reservation{}, domain.Errorf(domain.ECodeConflict,
			"La commande %s n'a pas de location en cours : aucune clé à changer.", orderRef)
	}
	return r, nil
}

// installKey makes pubKey the only key of the order's account on its host.
func (d *Driver) installKey(ctx context.Context, r reservation, pubKey string) error {
	client, closeFn, err := d.connect(ctx, r)
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := d.runScript(ctx, client, setkeyScript, [][2]string{{"KD_USER", r.UnixUser}, {"KD_PUBKEY", pubKey}},
		d.step(ctx, r.OrderRef))
	if err != nil {
		return fmt.Errorf("set key of %s on %s: %w", r.OrderRef, r.Name, err)
	}
	if !hasLine(res.Stdout, "KD_SETKEY_OK "+res.Tag) {
		return fmt.Errorf("set key of %s on %s: script ended early", r.OrderRef, r.Name)
	}
	return nil
}

// ReplaceKey makes the customer's own public key (an authorized_keys line,
// validated by the caller) the only key of a running rental: recorded on
// the order first, so a prepare retry installs it too, then applied on the
// host, where the old key (given or generated) stops working. A generated
// private key still on the access is erased. Retrying after a failure
// applies it again.
func (d *Driver) ReplaceKey(ctx context.Context, orderRef, publicKey string) error {
	r, err := d.runningReservation(ctx, orderRef)
	if err != nil {
		return err
	}
	pk, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(publicKey))
	if err != nil || len(options) > 0 || strings.TrimSpace(string(rest)) != "" {
		return domain.FieldError("ssh_public_key", "Une seule clé publique SSH est attendue, sans options.")
	}
	// Only the key itself is written on the host (no comment, no options).
	publicKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET ssh_public_key = $2 WHERE ref = $1`, orderRef, publicKey); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE order_access SET private_key = NULL, key_fingerprint = $2 WHERE order_ref = $1`,
			orderRef, ssh.FingerprintSHA256(pk))
		return err
	})
	if err != nil {
		return fmt.Errorf("replace key of %s: %w", orderRef, err)
	}
	return d.installKey(ctx, r, publicKey)
}

// ReissueKey generates a new key pair for a running rental, stores its
// private key sealed on the access (to be shown to the owner again, once)
// and makes its public key the only one on the host: the previous key,
// generated or the customer's own, stops working.
func (d *Driver) ReissueKey(ctx context.Context, orderRef string) error {
	r, err := d.runningReservation(ctx, orderRef)
	if err != nil {
		return err
	}
	priv, pub, err := accesskey.New(accesskey.Comment(orderRef))
	if err != nil {
		return fmt.Errorf("generate key pair: %w", err)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pub))
	if err != nil {
		return err
	}
	err = postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET ssh_public_key = NULL WHERE ref = $1`, orderRef); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE host_reservations SET public_key = $2, private_key = NULL WHERE id = $1`, r.ID, pub); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE order_access SET private_key = $2, key_fingerprint = $3, private_key_shown_at = NULL
			WHERE order_ref = $1`, orderRef, postgres.AccessPrivateKey.Seal(d.Keyring, orderRef, priv), ssh.FingerprintSHA256(pk))
		return err
	})
	if err != nil {
		return fmt.Errorf("reissue key of %s: %w", orderRef, err)
	}
	return d.installKey(ctx, r, pub)
}
