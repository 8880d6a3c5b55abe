package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/app"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/secrets"
)

// keyedHarness serves the API over postgres.Store, as kernodeck api does.
// The generated key is shown on exactly one read here (KeyShowWindow 0).
func keyedHarness(t *testing.T, provisioner string) (*harness, *secrets.Keyring) {
	kr, err := secrets.Parse(secrets.Generate("t1"))
	require.NoError(t, err)
	h := newDBHarness(t, func(db *postgres.DB, _ *api.Config, d *api.Deps) {
		st := postgres.NewStore(db, kr, provisioner)
		st.KeyShowWindow = 0
		d.Stores, d.Availability, d.Models, d.OwnerAccess, d.KeyRequests, d.Pinger = app.APIStores(st), st, st, st, st, st
	})
	return h, kr
}

func TestOrderTakesAValidSSHPublicKeyOnly(t *testing.T) {
	h, _ := keyedHarness(t, postgres.ProvisionerSSH)
	c := h.register("keys@example.com")
	base := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"}
	for _, bad := range []string{
		"not a key",
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UO",                                              // truncated
		`command="rm -rf /" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl`, // options
	} {
		body := map[string]any{"ssh_public_key": bad}
		for k, v := range base {
			body[k] = v
		}
		r := h.do("POST", "/v1/orders", body, c.auth)
		require.Equal(t, http.StatusBadRequest, r.Code, bad)
		require.Equal(t, "ssh_public_key", r.errField())
	}
	const good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ada@laptop"
	body := map[string]any{"ssh_public_key": "  " + good + "\n"}
	for k, v := range base {
		body[k] = v
	}
	r := h.do("POST", "/v1/orders", body, c.auth)
	require.Equal(t, http.StatusCreated, r.Code)
	require.Equal(t, good, r.obj("order")["ssh_public_key"])
}

// TestPrivateKeyRevealedByPostOnly: GET /v1/orders/{ref} has no side
// effect; the generated key is revealed by an explicit POST, to its owner.
func TestPrivateKeyRevealedByPostOnly(t *testing.T) {
	h, kr := keyedHarness(t, postgres.ProvisionerSSH)
	c := h.register("once@example.com")
	ref := h.order(c)
	const pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
	_, err := h.db.Exec(`INSERT INTO order_access (order_ref, host, port, username, private_key, jupyter_url, jupyter_token,
		gpu_model_seen, gpu_count_seen, driver_version, cuda_version) VALUES ($1, '10.0.0.7', 22, 'kd-x', $2,
		'http://10.0.0.7:8888/lab', $3, 'NVIDIA RTX A5000', 1, '570.211.01', '12.8')`,
		ref, kr.Seal(pem, "order_access.private_key:"+ref), kr.Seal("tok-0123456789", "order_access.jupyter_token:"+ref))
	require.NoError(t, err)

	// Support first: sees that access exists, never a secret, consumes nothing.
	s := h.do("GET", "/v1/support/orders/"+ref, nil, agent)
	require.Equal(t, http.StatusOK, s.Code)
	require.NotContains(t, s.Body.String(), "PRIVATE KEY")
	require.NotContains(t, s.Body.String(), "tok-0123456789")

	// Reading the order (a GET any site can trigger) reveals nothing and
	// starts nothing, however often.
	for range 3 {
		r := h.do("GET", "/v1/orders/"+ref, nil, c.auth)
		require.Equal(t, http.StatusOK, r.Code)
		acc := r.obj("access")
		require.NotContains(t, r.Body.String(), "PRIVATE KEY")
		require.Equal(t, true, acc["private_key_available"])
		require.NotContains(t, acc, "private_key_shown_at")
		require.Equal(t, "tok-0123456789", acc["jupyter_token"])
	}
	var shown *time.Time
	require.NoError(t, h.db.Get(&shown, `SELECT private_key_shown_at FROM order_access WHERE order_ref = $1`, ref))
	require.Nil(t, shown, "a GET started the key's window")

	// Another customer cannot reveal it; a cookie session needs the CSRF token.
	other := h.register("other-once@example.com")
	require.Equal(t, http.StatusNotFound, h.do("POST", "/v1/orders/"+ref+"/private-key", nil, other.auth).Code)
	require.Equal(t, http.StatusForbidden, h.do("POST", "/v1/orders/"+ref+"/private-key", nil, auth{cookie: c.web.cookie}).Code)

	// The explicit POST reveals it (window 0 here: exactly once), then it is erased.
	r := h.do("POST", "/v1/orders/"+ref+"/private-key", nil, c.web)
	require.Equal(t, http.StatusOK, r.Code, r.Body.String())
	require.Equal(t, pem, r.body["private_key"])
	r = h.do("POST", "/v1/orders/"+ref+"/private-key", nil, c.auth)
	require.Equal(t, http.StatusConflict, r.Code)
	r = h.do("GET", "/v1/orders/"+ref, nil, c.auth)
	acc := r.obj("access")
	require.Equal(t, false, acc["private_key_available"])
	require.NotNil(t, acc["private_key_shown_at"])
	var stored *string
	require.NoError(t, h.db.Get(&stored, `SELECT private_key FROM order_access WHERE order_ref = $1`, ref))
	require.Nil(t, stored, "the private key is erased once shown")
}

func TestQuoteSaysWhetherAHostIsFreeNow(t *testing.T) {
	h, _ := keyedHarness(t, postgres.ProvisionerSSH)
	q := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"}
	r := h.do("POST", "/v1/quote", q, auth{})
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, false, r.obj("availability")["available_now"])
	_, err := h.db.Exec(`INSERT INTO gpu_hosts (name, address, host_key_fingerprint, gpu_model, gpu_count)
		VALUES ('gpu1', '10.0.0.7', 'SHA256:` + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" + `', 'rtx-a5000', 1)`)
	require.NoError(t, err)
	r = h.do("POST", "/v1/quote", q, auth{})
	require.Equal(t, true, r.obj("availability")["available_now"])
	require.Equal(t, true, r.obj("availability")["fits"])
	require.Nil(t, r.obj("availability")["message"])
	q["lots"] = 2 // no host with two A5000
	r = h.do("POST", "/v1/quote", q, auth{})
	require.Equal(t, false, r.obj("availability")["available_now"])
	require.Equal(t, false, r.obj("availability")["fits"])
	require.Contains(t, r.obj("availability")["message"], "choisissez 1 lot (1 GPU)")
	// The order itself is refused with the same words.
	c := h.register("fits@example.com")
	r = h.do("POST", "/v1/orders", q, c.auth)
	require.Equal(t, http.StatusBadRequest, r.Code, r.Body.String())
	require.Contains(t, r.Body.String(), "choisissez 1 lot (1 GPU)")
}
