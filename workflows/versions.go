package workflows

// The workflows' history versions: what a run records at its start, and
// what caps it (a starter's or a worker's ceiling).

import (
	"fmt"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Versions of the workflows' commands. One change ID, read once when a
// workflow starts (historyVersion): every later branch reads the stored
// value, so a new behaviour costs one marker per workflow, not one per
// call site, and a workflow started before it keeps its old commands.
const (
	changeHistory = "kernodeck-history"
	// vLocalTimeline: timeline writes are local activities (one marker
	// event, no workflow task of their own), a step's "done" event goes
	// with the next event's write, and the payment's search attributes
	// ride on the status upsert.
	vLocalTimeline workflow.Version = 1
	// vReorgDust: a payment reverted after its confirmation is uncounted
	// (back to awaiting payment, or flagged for support), dust summaries
	// go to support's queue, and payment signals are handled in batches
	// (one timeline write per batch).
	vReorgDust workflow.Version = 2
	// vContinueAsNew: a rental or top-up whose history passes its bound
	// (or the server's suggestion) continues as new at its next waiting
	// point, carrying its whole state.
	vContinueAsNew workflow.Version = 3
	// vReversalOrder: a payment state is ordered by its generation
	// (PaymentEvent.Reversals) against the reversals already applied, so a
	// batch holding a reversal after confirmation and the same payment's
	// confirmation mined again counts it once, whichever is read first.
	vReversalOrder workflow.Version = 4
	// vRefundShortfall: order refunds paid out on a payment a reversal
	// removes are its shortfall, not owed again by the order (what is due
	// stays the total less what remains counted); the payment mined again
	// backs them first, the rest counting as any payment.
	vRefundShortfall workflow.Version = 5
	// vStateOrder: a payment state older than one already applied
	// (PaymentEvent.StateVersion) is ignored, so a batch read by kind
	// leaves each payment in its newest state (reverted then seen again,
	// seen in the mempool then replaced, reverted before a confirmation).
	vStateOrder workflow.Version = 6
	// vAddressed: a payment signal must be addressed to the workflow
	// (PaymentEvent.Target) and name one of its own payment requests with
	// that request's address, asset and network; support actions are
	// checked against their support_actions row before they change
	// anything.
	vAddressed workflow.Version = 7
	// vOneProvisioning: the provisioning steps run in one activity
	// (activities.Provision) that writes their events itself, three
	// workflow tasks fewer per order; attempts count for the whole
	// preparation, a retry resuming at the step that failed.
	vOneProvisioning workflow.Version = 8
	// vLeanTasks: a workflow task upserts its search attributes once, when
	// the main flow waits outside it (searchAttrs.sync), instead of once
	// per status move (each upsert writes the visibility row and all its
	// indexes on the server), and the
	// rental period waits on one timer, to its next reminder or its end,
	// instead of one per reminder and one for the end.
	vLeanTasks workflow.Version = 9
	// vStartInSync: the attributes a run starts with (its reference,
	// customer, status...) wait for sync too, so the first workflow task
	// upserts once even when a payment or an update came with it (before,
	// setup upserted them at once, and sync again what the task changed).
	vStartInSync workflow.Version = 10
	// vDrain: only money a watcher recorded is counted, and nothing a run
	// received is left behind when it ends or continues as new. Payment
	// signals are checked, a batch at a time, against chain_payments and
	// their payment requests in one local activity (listenChecked); a
	// signal is busy from the moment it leaves its channel, and an
	// ending run drains its channels as a continuing one does. The
	// history bound is checked at every wait of the main flow and after
	// every update (updates counted against the server's limit), a
	// payment request still valid is refused by the validator (no
	// history), local activities hand over to an activity after
	// localRetryBound, handlers never wait on an unbounded retry, and a
	// teardown that cannot finish is reported (teardownStuckAfter).
	vDrain workflow.Version = 11
	// vQueue: a paid order with no free machine waits in line
	// (waiting_for_machine) instead of failing its provisioning: served
	// in payment order by an activity retried until it takes a machine,
	// and closed by a refund of what it paid, the customer's or support's
	// (takeMachine).
	vQueue workflow.Version = 12
	// vHandOver: an update's work that outlasts handlerPatience (the
	// database away) goes on in the run, holding its lock, while the
	// update answers in_progress and the validators refuse new updates
	// until it is done (handOver): no caller waits on an unbounded retry.
	vHandOver workflow.Version = 13
	// vOneTransition: every move of a rental goes through its transition
	// (phase.go) with its write; the one that did not, the move to paid
	// when payments cover the order, writes its status with the covering
	// payment's event (before, only with the "paid" event the main flow
	// records next).
	vOneTransition workflow.Version = 14
	// vExtension: customers extend their own rental (issue 39, item 2):
	// the extend update takes the customer's extension (paid from the
	// balance in one activity with its reservation, or by the crypto
	// payment its top-up credited), and a top-up paying an extension asks
	// the rental's workflow to apply it once credited. A run below it
	// refuses a customer's extension.
	vExtension workflow.Version = 15
	// vMaxHistory, the version new workflows record, is in rollout.go
	// (rollout_kdrollout.go: a test release one version ahead).
)

// NewestVersion is the newest command version this build runs, and
// OldestStartVersion the oldest a workflow may still be started at: below
// it a workflow would not check that its inputs are addressed to it.
const (
	NewestVersion      = int(vMaxHistory)
	OldestStartVersion = int(vAddressed)
)

// historyVersion is the workflow's command version, taken at its start
// (read from its history ever after). A new workflow records the newest
// version its worker knows, or ceiling when its starter set one
// (wfclient.Client.MaxVersion): during a rolling restart onto a release
// with a new version, workflows keep being started at the version the old
// workers still run, so none of their tasks can fail on an old worker.
func historyVersion(ctx workflow.Context, ceiling int) workflow.Version {
	return workflow.GetVersion(ctx, changeHistory, workflow.DefaultVersion, startVersion(ceiling))
}

// ChangeVersionTag is how TemporalChangeVersion names history version v
// (the SDK's "<change id>-<version>").
func ChangeVersionTag(v int) string { return fmt.Sprintf("%s-%d", changeHistory, v) }

// RecordedVersion reads the command version a workflow recorded from one
// event of its history (its kernodeck-history version marker, payloads
// opened by dc); ok is false for any other event.
func RecordedVersion(ev *historypb.HistoryEvent, dc converter.DataConverter) (v int, ok bool) {
	m := ev.GetMarkerRecordedEventAttributes()
	if m == nil || m.GetMarkerName() != "Version" {
		return 0, false
	}
	var id string
	if dc.FromPayloads(m.GetDetails()["change-id"], &id) != nil || id != changeHistory {
		return 0, false
	}
	return v, dc.FromPayloads(m.GetDetails()["version"], &v) == nil
}

// VersionCeiling is the worker's PreferredVersionProvider for ceiling
// (KERNODECK_WORKFLOW_VERSION; 0: none): every run a worker starts, a run
// continuing as new included, records at most startVersion(ceiling), so
// that during a rolling restart onto a release with a new version no run
// records one the old workers cannot replay. The provider is asked only
// when the version is first recorded, never on replay.
func VersionCeiling(ceiling int) func(worker.PreferredVersionProviderInput) *worker.VersionPreference {
	return func(in worker.PreferredVersionProviderInput) *worker.VersionPreference {
		if in.ChangeID != changeHistory || ceiling <= 0 {
			return nil
		}
		return &worker.VersionPreference{Version: startVersion(ceiling), ClampToSupportedRange: true}
	}
}

// startVersion is the version a workflow starting under ceiling records:
// the build's newest when ceiling is 0 or above it, never below
// OldestStartVersion.
func startVersion(ceiling int) workflow.Version {
	if ceiling <= 0 || ceiling >= NewestVersion {
		return vMaxHistory
	}
	return workflow.Version(max(ceiling, OldestStartVersion))
}
