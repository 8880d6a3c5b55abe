package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

const testFingerprint = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// The operators' inventory: a host added is listed, available, with no
// order and no check; drained it keeps its note; held by an order it cannot
// be removed; a name no host has is ErrNoHost.
func TestHostsInventory(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	hosts := postgres.Hosts{DB: db}

	added, err := hosts.AddHost(ctx, postgres.Host{Name: "gpu-1", Address: "10.0.0.1", Port: 22,
		Fingerprint: testFingerprint, KeyType: "ssh-ed25519", GPUModel: "rtx-a5000", GPUCount: 1, Note: "rack 2"})
	require.NoError(t, err)
	require.Equal(t, "available", added.State)
	require.Equal(t, "rack 2", added.Note)
	require.Nil(t, added.OrderRef)

	list, err := hosts.ListHosts(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "gpu-1", list[0].Name)
	require.Nil(t, list[0].LastCheck)

	require.NoError(t, hosts.SetHostState(ctx, "gpu-1", "draining", "maintenance"))
	list, err = hosts.ListHosts(ctx)
	require.NoError(t, err)
	require.Equal(t, "draining", list[0].State)
	require.Equal(t, "maintenance", list[0].Note)
	require.ErrorIs(t, hosts.SetHostState(ctx, "nope", "draining", ""), postgres.ErrNoHost)

	// Held by an order: listed with it, not removable.
	require.NoError(t, hosts.SetHostState(ctx, "gpu-1", "available", ""))
	_, ref := pgtest.AccountWithOrder(t, db, "inv@example.com")
	setStatus(t, db, ref, domain.StatusPaid)
	r, err := hosts.ReserveHost(ctx, ref, "rtx-a5000", 1, "kd-inv")
	require.NoError(t, err)
	require.Equal(t, "gpu-1", r.Name)
	list, err = hosts.ListHosts(ctx)
	require.NoError(t, err)
	require.NotNil(t, list[0].OrderRef)
	require.Equal(t, ref, *list[0].OrderRef)
	require.ErrorIs(t, hosts.RemoveHost(ctx, "gpu-1"), postgres.ErrHostBusy)
	require.ErrorIs(t, hosts.RemoveHost(ctx, "nope"), postgres.ErrNoHost)

	// Released, it goes, and its last check is listed until then.
	active, ok, err := hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.True(t, ok)
	done, err := hosts.ReleaseHost(ctx, postgres.HostRelease{Reservation: active})
	require.NoError(t, err)
	require.True(t, done.Done)
	list, err = hosts.ListHosts(ctx)
	require.NoError(t, err)
	require.NotNil(t, list[0].LastCheck)
	require.Equal(t, ref, list[0].LastCheck.OrderRef)
	require.Equal(t, "released", list[0].LastCheck.State)
	require.NoError(t, hosts.RemoveHost(ctx, "gpu-1"))
	list, err = hosts.ListHosts(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
}

// hostsOrder is a paid order of one rtx-a5000 with, if key is set, the
// customer's own public key.
func hostsOrder(t *testing.T, db *postgres.DB, email, key string) string {
	t.Helper()
	_, ref := pgtest.AccountWithOrder(t, db, email)
	setStatus(t, db, ref, domain.StatusPaid)
	if key != "" {
		_, err := db.Exec(`UPDATE orders SET ssh_public_key = $2 WHERE ref = $1`, ref, key)
		require.NoError(t, err)
	}
	return ref
}

type accessRow struct {
	Password       sql.NullString `db:"password"`
	PrivateKey     sql.NullString `db:"private_key"`
	KeyFingerprint sql.NullString `db:"key_fingerprint"`
	JupyterURL     sql.NullString `db:"jupyter_url"`
	JupyterToken   sql.NullString `db:"jupyter_token"`
	Notes          string         `db:"notes"`
	Revoked        bool           `db:"revoked"`
	Shown          bool           `db:"shown"`
}

func readAccess(t *testing.T, db *postgres.DB, ref string) accessRow {
	t.Helper()
	var a accessRow
	require.NoError(t, db.Get(&a, `SELECT password, private_key, key_fingerprint, jupyter_url, jupyter_token, notes,
		revoked_at IS NOT NULL AS revoked, private_key_shown_at IS NOT NULL AS shown
		FROM order_access WHERE order_ref = $1`, ref))
	return a
}

func hostState(t *testing.T, db *postgres.DB, name string) (state, note string) {
	t.Helper()
	require.NoError(t, db.QueryRow(`SELECT state, note FROM gpu_hosts WHERE name = $1`, name).Scan(&state, &note))
	return state, note
}

// An order's whole stay on a host, as the SSH driver writes it: reserve
// (none free, then one, then kept), secrets once, what prepare and verify
// saw, the access once (the host in use, the reservation's key erased),
// key changes on the order, revocation, the customer's flag, the release
// (clean, with the flag in the host's note).
func TestHostReservationLifecycle(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	hosts := postgres.Hosts{DB: db}
	ref := hostsOrder(t, db, "life@example.com", "")

	r, err := hosts.ReserveHost(ctx, ref, "rtx-a5000", 1, "kd-life")
	require.NoError(t, err)
	require.Equal(t, postgres.HostReserved{}, r, "no host: none reserved")
	_, ok, err := hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.False(t, ok)

	addGPUHost(t, db, "gpu-a", "rtx-a5000", 1)
	r, err = hosts.ReserveHost(ctx, ref, "rtx-a5000", 1, "kd-life")
	require.NoError(t, err)
	require.Equal(t, "gpu-a", r.Name)
	require.False(t, r.Already)
	again, err := hosts.ReserveHost(ctx, ref, "rtx-a5000", 1, "kd-life")
	require.NoError(t, err)
	require.True(t, again.Already)
	state, _ := hostState(t, db, "gpu-a")
	require.Equal(t, "reserved", state)

	res, ok, err := hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "kd-life", res.UnixUser)
	require.Equal(t, "gpu-a", res.Name)
	require.False(t, res.PublicKey.Valid)

	// Secrets: written once; the second attempt gets the first's.
	pub, tok, err := hosts.ReservationSecrets(ctx, res.ID, "sealed-priv-1", "ssh-ed25519 AAAA1", "sealed-tok-1")
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 AAAA1", pub)
	require.Equal(t, "sealed-tok-1", tok)
	pub, tok, err = hosts.ReservationSecrets(ctx, res.ID, "sealed-priv-2", "ssh-ed25519 AAAA2", "sealed-tok-2")
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 AAAA1", pub)
	require.Equal(t, "sealed-tok-1", tok)
	pub, tok, err = hosts.ReservationSecrets(ctx, res.ID, "", "", "")
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 AAAA1", pub)
	require.Equal(t, "sealed-tok-1", tok)

	// What prepare and verify recorded.
	floor, err := hosts.UIDFloor(ctx, res.SSHHost.ID)
	require.NoError(t, err)
	require.Equal(t, int64(0), floor)
	require.NoError(t, hosts.RecordPrepared(ctx, res.ID, "Contrôle PyTorch réussi.", 2001, "100000:65536"))
	require.NoError(t, hosts.RecordAccountIDs(ctx, res.ID, 2999, "100000:65536 200000:65536"))
	require.NoError(t, hosts.RecordGPUsSeen(ctx, res.ID, postgres.GPUsSeen{Model: "NVIDIA RTX A5000", Count: 1,
		Driver: "570.1", CUDA: "12.8"}))
	floor, err = hosts.UIDFloor(ctx, res.SSHHost.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2002), floor, "the uid prepare recorded stays")
	res, _, err = hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, int64(2001), res.UID.Int64)
	require.Equal(t, "100000:65536 200000:65536", res.SubIDs)
	require.Equal(t, "Contrôle PyTorch réussi.", res.PresetCheck.String)
	var seen struct {
		Model  string `db:"gpu_model_seen"`
		Count  int    `db:"gpu_count_seen"`
		Driver string `db:"driver_version"`
		CUDA   string `db:"cuda_version"`
	}
	require.NoError(t, db.Get(&seen, `SELECT gpu_model_seen, gpu_count_seen, driver_version, cuda_version
		FROM host_reservations WHERE id = $1`, res.ID))
	require.Equal(t, "NVIDIA RTX A5000 1 570.1 12.8", strings.Join([]string{seen.Model, "1", seen.Driver, seen.CUDA}, " "))
	require.Equal(t, 1, seen.Count)

	vendor, pattern, err := hosts.GPUModelCheck(ctx, "rtx-a5000")
	require.NoError(t, err)
	require.Equal(t, "nvidia", vendor)
	require.NotNil(t, pattern)
	_, err = db.Exec(`UPDATE gpu_models SET smi_name_pattern = NULL WHERE model = 'rtx-a5000'`)
	require.NoError(t, err)
	_, pattern, err = hosts.GPUModelCheck(ctx, "rtx-a5000")
	require.NoError(t, err)
	require.Nil(t, pattern)
	_, _, err = hosts.GPUModelCheck(ctx, "no-such-model")
	require.Error(t, err)

	// The access, once: the host in use, the reservation's key erased.
	key, err := hosts.OrderPublicKey(ctx, ref)
	require.NoError(t, err)
	require.Empty(t, key)
	live, err := hosts.LiveAccess(ctx, ref)
	require.NoError(t, err)
	require.False(t, live)
	access := postgres.NewAccess{OrderRef: ref, Host: res.Address, Port: res.Port, Username: res.UnixUser,
		PrivateKey: "sealed-access-priv", KeyFingerprint: "SHA256:fp1", JupyterURL: "http://127.0.0.1:8888/lab",
		JupyterToken: "sealed-access-tok", GPUModel: "NVIDIA RTX A5000", GPUCount: 1, Notes: "ok"}
	addr, err := hosts.CreateHostAccess(ctx, access, res)
	require.NoError(t, err)
	require.Equal(t, postgres.AccessAddress{Host: "gpu-a.example", Port: 22, Username: "kd-life"}, addr)
	access.Username, access.Notes = "someone-else", "second"
	addr, err = hosts.CreateHostAccess(ctx, access, res)
	require.NoError(t, err)
	require.Equal(t, "kd-life", addr.Username, "the first access stays")
	a := readAccess(t, db, ref)
	require.False(t, a.Password.Valid)
	require.Equal(t, "sealed-access-priv", a.PrivateKey.String)
	require.Equal(t, "sealed-access-tok", a.JupyterToken.String)
	require.Equal(t, "ok", a.Notes)
	state, _ = hostState(t, db, "gpu-a")
	require.Equal(t, "in_use", state)
	res, _, err = hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.False(t, res.PrivateKey.Valid, "the reservation's private key is erased")
	live, err = hosts.LiveAccess(ctx, ref)
	require.NoError(t, err)
	require.True(t, live)

	// Key changes: the customer's own, then a generated one.
	require.NoError(t, hosts.ReplaceOrderKey(ctx, ref, "ssh-ed25519 CUSTOMER", "SHA256:fp2"))
	key, err = hosts.OrderPublicKey(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 CUSTOMER", key)
	a = readAccess(t, db, ref)
	require.False(t, a.PrivateKey.Valid)
	require.Equal(t, "SHA256:fp2", a.KeyFingerprint.String)
	_, err = db.Exec(`UPDATE order_access SET private_key_shown_at = now() WHERE order_ref = $1`, ref)
	require.NoError(t, err)
	require.NoError(t, hosts.ReissueOrderKey(ctx, ref, res.ID, "ssh-ed25519 NEW", "sealed-new-priv", "SHA256:fp3"))
	key, err = hosts.OrderPublicKey(ctx, ref)
	require.NoError(t, err)
	require.Empty(t, key)
	a = readAccess(t, db, ref)
	require.Equal(t, "sealed-new-priv", a.PrivateKey.String)
	require.Equal(t, "SHA256:fp3", a.KeyFingerprint.String)
	require.False(t, a.Shown, "the new key is shown once again")
	res, _, err = hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 NEW", res.PublicKey.String)

	// The customer's flag: added once per text.
	require.NoError(t, hosts.FlagCustomer(ctx, res.ID, "setuid binary"))
	require.NoError(t, hosts.FlagCustomer(ctx, res.ID, "setuid binary"))
	require.NoError(t, hosts.FlagCustomer(ctx, res.ID, "cron job"))
	var flag string
	require.NoError(t, db.Get(&flag, `SELECT customer_flag FROM host_reservations WHERE id = $1`, res.ID))
	require.Equal(t, "setuid binary ; cron job", flag)

	// Revoked: secrets erased, once.
	require.NoError(t, hosts.RevokeAccess(ctx, ref))
	require.NoError(t, hosts.RevokeAccess(ctx, ref))
	a = readAccess(t, db, ref)
	require.True(t, a.Revoked)
	require.False(t, a.PrivateKey.Valid)
	require.False(t, a.JupyterToken.Valid)
	live, err = hosts.LiveAccess(ctx, ref)
	require.NoError(t, err)
	require.False(t, live)

	// Released clean: available again, the customer's flag in its note.
	done, err := hosts.ReleaseHost(ctx, postgres.HostRelease{Reservation: res, GPUReset: "ok"})
	require.NoError(t, err)
	require.True(t, done.Done)
	require.False(t, done.Broken)
	require.NotNil(t, done.CustomerFlag)
	require.Equal(t, "setuid binary ; cron job", *done.CustomerFlag)
	state, note := hostState(t, db, "gpu-a")
	require.Equal(t, "available", state)
	require.Contains(t, note, "avait sali la machine : setuid binary ; cron job")
	var reset string
	require.NoError(t, db.Get(&reset, `SELECT gpu_reset FROM gpu_hosts WHERE name = 'gpu-a'`))
	require.Equal(t, "ok", reset)
	done, err = hosts.ReleaseHost(ctx, postgres.HostRelease{Reservation: res})
	require.NoError(t, err)
	require.False(t, done.Done, "released once")
	_, ok, err = hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.False(t, ok)
}

// A host set aside fails its reservation (the order's last failure) and is
// broken; a release that finds the host dirty breaks it too; a repair sees
// the past reservations not found clean, and puts the host back (or keeps
// it broken with what is left), never while an order holds it.
func TestHostsSetAsideReleaseDirtyAndRepair(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	hosts := postgres.Hosts{DB: db}
	addGPUHost(t, db, "gpu-b", "rtx-a5000", 1)
	ref := hostsOrder(t, db, "aside@example.com", "ssh-ed25519 OWN")
	key, err := hosts.OrderPublicKey(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 OWN", key)

	_, failed, err := hosts.LastHostFailure(ctx, ref)
	require.NoError(t, err)
	require.False(t, failed, "no reservation yet")
	_, err = hosts.ReserveHost(ctx, ref, "rtx-a5000", 1, "kd-aside")
	require.NoError(t, err)
	_, failed, err = hosts.LastHostFailure(ctx, ref)
	require.NoError(t, err)
	require.False(t, failed, "active, not failed")
	res, _, err := hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.NoError(t, hosts.SetHostAside(ctx, res, "vérification : 2 GPU", &postgres.GPUsSeen{Model: "X", Count: 2},
		"vérification : 2 GPU (commande "+ref+")"))
	failure, failed, err := hosts.LastHostFailure(ctx, ref)
	require.NoError(t, err)
	require.True(t, failed)
	require.Equal(t, "vérification : 2 GPU", failure)
	state, note := hostState(t, db, "gpu-b")
	require.Equal(t, "broken", state)
	require.Contains(t, note, ref)
	_, ok, err := hosts.HostReservation(ctx, ref)
	require.NoError(t, err)
	require.False(t, ok)

	// Repair: the failed reservation is checked again; dirty, it stays broken.
	h, past, err := hosts.HostToRepair(ctx, "gpu-b", 20)
	require.NoError(t, err)
	require.Equal(t, "gpu-b", h.Name)
	require.Len(t, past, 1)
	require.Equal(t, ref, past[0].OrderRef)
	require.NoError(t, hosts.FinishRepair(ctx, postgres.HostRepair{Host: h, Dirty: "réparation refusée"}))
	state, note = hostState(t, db, "gpu-b")
	require.Equal(t, "broken", state)
	require.Equal(t, "réparation refusée", note)
	// Clean: back in rotation, the reservation found clean is not checked again.
	require.NoError(t, hosts.FinishRepair(ctx, postgres.HostRepair{Host: h, Cleaned: []int64{past[0].ID},
		GPUReset: "reset", Note: "réparé"}))
	state, note = hostState(t, db, "gpu-b")
	require.Equal(t, "available", state)
	require.Equal(t, "réparé", note)
	_, past, err = hosts.HostToRepair(ctx, "gpu-b", 20)
	require.NoError(t, err)
	require.Empty(t, past)
	_, _, err = hosts.HostToRepair(ctx, "nope", 20)
	require.ErrorIs(t, err, postgres.ErrNoHost)

	// Held by an order: no repair.
	ref2 := hostsOrder(t, db, "aside2@example.com", "")
	r, err := hosts.ReserveHost(ctx, ref2, "rtx-a5000", 1, "kd-aside2")
	require.NoError(t, err)
	require.Equal(t, "gpu-b", r.Name)
	_, _, err = hosts.HostToRepair(ctx, "gpu-b", 20)
	require.ErrorIs(t, err, postgres.ErrHostBusy)
	require.ErrorIs(t, hosts.FinishRepair(ctx, postgres.HostRepair{Host: h, Note: "x"}), postgres.ErrHostBusy)

	// Released dirty: broken, the failure and the customer's doing in its note.
	res2, _, err := hosts.HostReservation(ctx, ref2)
	require.NoError(t, err)
	require.NoError(t, hosts.FlagCustomer(ctx, res2.ID, "fork bomb"))
	done, err := hosts.ReleaseHost(ctx, postgres.HostRelease{Reservation: res2, Failure: "nettoyage incomplet : processus"})
	require.NoError(t, err)
	require.True(t, done.Done)
	require.True(t, done.Broken)
	state, note = hostState(t, db, "gpu-b")
	require.Equal(t, "broken", state)
	require.Contains(t, note, "nettoyage incomplet : processus ; du fait du client : fork bomb (commande "+ref2)
	var cleaned bool
	require.NoError(t, db.Get(&cleaned, `SELECT cleaned_at IS NOT NULL FROM host_reservations WHERE id = $1`, res2.ID))
	require.False(t, cleaned)

	// A closed order takes no host.
	ref3 := hostsOrder(t, db, "aside3@example.com", "")
	setStatus(t, db, ref3, domain.StatusCancelled)
	_, err = hosts.ReserveHost(ctx, ref3, "rtx-a5000", 1, "kd-aside3")
	require.Equal(t, domain.ECodeConflict, domain.ErrorCode(err))
	require.False(t, errors.Is(err, postgres.ErrHostBusy))
}

// The local driver's GPUs and access: reserve (then already), prepare,
// what is held, verified, the access once, revoked (secrets kept), released
// once; no inventory and too few GPUs are said as such.
func TestLocalGPUs(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	local := postgres.LocalGPUs{DB: db}
	ref := hostsOrder(t, db, "local@example.com", "ssh-ed25519 LOCAL")

	ok, err := local.PrepareGPUs(ctx, ref, "pytorch")
	require.NoError(t, err)
	require.False(t, ok, "nothing reserved yet")
	outcome, _, err := local.ReserveGPUs(ctx, ref, "rtx-a5000", 1)
	require.NoError(t, err)
	require.Equal(t, "reserved", outcome)
	outcome, _, err = local.ReserveGPUs(ctx, ref, "rtx-a5000", 1)
	require.NoError(t, err)
	require.Equal(t, "already", outcome)
	ok, err = local.PrepareGPUs(ctx, ref, "pytorch")
	require.NoError(t, err)
	require.True(t, ok)
	model, gpus, err := local.ReservedGPUs(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, "rtx-a5000", model)
	require.Equal(t, 1, gpus)
	require.NoError(t, local.MarkGPUsVerified(ctx, ref))
	var state, preset string
	require.NoError(t, db.QueryRow(`SELECT state, preset FROM gpu_reservations WHERE order_ref = $1`, ref).Scan(&state, &preset))
	require.Equal(t, "verified pytorch", state+" "+preset)

	key, err := local.OrderPublicKey(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 LOCAL", key)
	addr, err := local.CreateAccess(ctx, postgres.NewAccess{OrderRef: ref, Host: "gpu.local", Port: 22, Username: "kdu",
		Password: "sealed-pw", KeyFingerprint: "SHA256:fp", GPUModel: "rtx-a5000", GPUCount: 1})
	require.NoError(t, err)
	require.Equal(t, postgres.AccessAddress{Host: "gpu.local", Port: 22, Username: "kdu"}, addr)
	addr, err = local.CreateAccess(ctx, postgres.NewAccess{OrderRef: ref, Host: "other", Port: 2, Username: "x", Password: "p"})
	require.NoError(t, err)
	require.Equal(t, "gpu.local", addr.Host, "the first access stays")
	a := readAccess(t, db, ref)
	require.Equal(t, "sealed-pw", a.Password.String)
	require.False(t, a.PrivateKey.Valid)
	require.False(t, a.JupyterURL.Valid)

	require.NoError(t, local.RevokeAccess(ctx, ref))
	require.NoError(t, local.RevokeAccess(ctx, ref))
	a = readAccess(t, db, ref)
	require.True(t, a.Revoked)
	require.NoError(t, local.ReleaseGPUs(ctx, ref))
	require.NoError(t, local.ReleaseGPUs(ctx, ref))
	_, _, err = local.ReservedGPUs(ctx, ref)
	require.Error(t, err, "nothing held once released")

	// No inventory of the model; not enough GPUs.
	ref2 := hostsOrder(t, db, "local2@example.com", "")
	_, err = db.Exec(`DELETE FROM gpu_inventory WHERE gpu_model = 'b200'`)
	require.NoError(t, err)
	outcome, _, err = local.ReserveGPUs(ctx, ref2, "b200", 1)
	require.NoError(t, err)
	require.Equal(t, "no_inventory", outcome)
	outcome, free, err := local.ReserveGPUs(ctx, ref2, "rtx-a5000", 10000)
	require.NoError(t, err)
	require.Equal(t, "no_capacity", outcome)
	require.Less(t, free, 10000)
}
