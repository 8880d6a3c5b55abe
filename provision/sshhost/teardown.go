package sshhost

import (
	"context"
	"fmt"
	"strings"

	"github.com/kernodeck/kernodeck/postgres"
)

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
		if err := d.Store.RecordAccountIDs(ctx, r.ID, uid, mergeIDs(r.SubIDs, sub)); err != nil {
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

// Release wipes what the customer left, checks the host is clean and gives
// it back: available again, unless an operator drained it or it broke. A
// host that could not be cleaned is marked broken with the reasons (shown to
// operators by `kernodeck hosts list`), and the order's release still ends:
// the host is out of rotation, the customer's access is closed.
func (d *Driver) Release(ctx context.Context, orderRef string) error {
	r, ok, err := d.Store.HostReservation(ctx, orderRef)
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
	done, err := d.Store.ReleaseHost(ctx, postgres.HostRelease{Reservation: r, Failure: t.reason(), GPUReset: t.GPUReset})
	switch {
	case err != nil:
		return fmt.Errorf("release %s: %w", orderRef, err)
	case !done.Done:
		return nil // released meanwhile
	case done.Broken:
		d.logger().Error("host set aside as broken: not clean after release", "host", r.Name, "order", orderRef,
			"left", t.Dirty, "customer", t.Customer)
		return nil
	}
	if done.CustomerFlag != nil {
		// Clean, but the customer had made it dirty (and the teardown
		// undid it): support is told on the host's record and the
		// reservation.
		d.logger().Error("customer made the host dirty; cleaned", "host", r.Name, "order", orderRef, "what", *done.CustomerFlag)
	}
	d.logger().Info("host released", "order", orderRef, "host", r.Name, "gpu_reset", t.GPUReset)
	return nil
}

// flagCustomer adds what the customer did to make their host dirty to the
// reservation's record (support reads it there, in the host's note and in
// its queue until an agent closes it: new text opens it again).
func (d *Driver) flagCustomer(ctx context.Context, reservationID int64, what []string) error {
	if len(what) == 0 {
		return nil
	}
	return d.Store.FlagCustomer(ctx, reservationID, strings.Join(what, " ; "))
}
