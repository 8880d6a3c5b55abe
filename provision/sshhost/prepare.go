package sshhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kernodeck/kernodeck/activities"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/accesskey"
)

// ensureSecrets generates the order's key pair (when the customer gave no
// public key) and Jupyter token once, stores them sealed on the reservation
// and returns the public key to install and the token. A retry finds them.
func (d *Driver) ensureSecrets(ctx context.Context, r reservation, customerKey, preset string) (pubKey, jupyterToken string, err error) {
	var priv, pub, tok string
	if customerKey == "" && !r.PublicKey.Valid {
		pem, line, err := accesskey.New(accesskey.Comment(r.OrderRef))
		if err != nil {
			return "", "", fmt.Errorf("generate key pair: %w", err)
		}
		priv, pub = postgres.ReservationPrivateKey.Seal(d.Keyring, r.OrderRef, pem), line
	}
	if preset == "notebook" && !r.JupyterTok.Valid {
		var b [24]byte
		_, _ = rand.Read(b[:])
		tok = postgres.ReservationJupyterToken.Seal(d.Keyring, r.OrderRef, hex.EncodeToString(b[:]))
	}
	// What won is returned: a concurrent or earlier attempt may have written first.
	storedPub, storedTok, err := d.Store.ReservationSecrets(ctx, r.ID, priv, pub, tok)
	if err != nil {
		return "", "", err
	}
	pubKey = customerKey
	if pubKey == "" {
		pubKey = storedPub
	}
	if storedTok != "" {
		if jupyterToken, err = postgres.ReservationJupyterToken.Open(d.Keyring, r.OrderRef, storedTok); err != nil {
			return "", "", err
		}
	}
	return pubKey, jupyterToken, nil
}

// Prepare creates the customer's account, installs their public key (theirs
// or a generated one) and lays out the preset. A host where customers could
// write to a network mount (kd_unfit_mounts in scripts/common.sh says which
// are accepted) is set aside first, without retry (ErrTypeHostRefused).
func (d *Driver) Prepare(ctx context.Context, in activities.PrepareInput) error {
	r, ok, err := d.Store.HostReservation(ctx, in.OrderRef)
	if err != nil {
		return err
	}
	if !ok {
		// A retry after this very step refused the host: say it again.
		failure, _, _ := d.Store.LastHostFailure(ctx, in.OrderRef)
		if reason, refused := strings.CutPrefix(failure, unfitPrefix); refused {
			return unfitError(reason)
		}
		return fmt.Errorf("prepare %s: no active host reservation", in.OrderRef)
	}
	customerKey, err := d.Store.OrderPublicKey(ctx, in.OrderRef)
	if err != nil {
		return err
	}
	pubKey, token, err := d.ensureSecrets(ctx, r, customerKey, in.Preset)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", in.OrderRef, err)
	}
	// Customer uids are never given twice on a host: prepare takes the next
	// one above its own counter and above every uid recorded here.
	floor, err := d.Store.UIDFloor(ctx, r.SSHHost.ID)
	if err != nil {
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
	if hasLine(res.Stdout, "KD_PREPARE_UNFIT "+res.Tag) {
		reason := "montage réseau inscriptible par les clients, que le nettoyage ne peut pas fouiller : " +
			strings.Join(prefixed(res.Stdout, "KD_UNFIT_MOUNT "), " ; ")
		closeFn() // the cleanup below opens its own connection
		if err := d.setAside(ctx, r, unfitPrefix+reason, nil, true); err != nil {
			return err
		}
		return unfitError(reason)
	}
	if !hasLine(res.Stdout, "KD_PREPARE_OK "+res.Tag) {
		return fmt.Errorf("prepare %s on %s: script ended early", in.OrderRef, r.Name)
	}
	uid, subIDs, ok := parseIDs(res.Stdout)
	if !ok {
		return fmt.Errorf("prepare %s on %s: the account's uid was not reported", in.OrderRef, r.Name)
	}
	// The ranges recorded stay recorded: a release searches every one.
	if err := d.Store.RecordPrepared(ctx, r.ID, presetCheck(res.Stdout), uid, mergeIDs(r.SubIDs, subIDs)); err != nil {
		return fmt.Errorf("prepare %s: %w", in.OrderRef, err)
	}
	return nil
}

// unfitPrefix starts the failure of a reservation whose host prepare
// refused.
const unfitPrefix = "préparation : "

// unfitError is prepare's refusal of a host unfit for customers (a writable
// network mount): like a host key mismatch, not retried; the host is set
// aside and the next attempt reserves another one.
func unfitError(reason string) error {
	return domain.Errorf(ErrTypeHostRefused,
		"La machine ne peut pas accueillir de client (%s) : elle est écartée, une autre sera réservée.", reason)
}

// prefixed returns the rest of every stdout line that starts with prefix.
func prefixed(stdout, prefix string) []string {
	var out []string
	for _, line := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// vendor is the GPU vendor of a catalog model (nvidia or amd).
func (d *Driver) vendor(ctx context.Context, model string) (string, error) {
	v, _, err := d.Store.GPUModelCheck(ctx, model)
	return v, err
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
// detail" line into the French note for the order ("": the preset has no
// check). The detail comes from the customer's side of the host: control
// characters are dropped and its length bounded.
func presetCheck(stdout string) string {
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
	return ""
}
