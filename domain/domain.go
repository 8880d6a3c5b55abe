package domain

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Durations a rental may have, in days.
var Durations = []int{3, 7, 30}

// Presets are the preparation wishes a customer can pick.
var Presets = []string{"python", "pytorch", "notebook", "inference"}

// TopUpAmountsCents are the only top-up amounts offered (100, 500, 2000, 10000 USD).
var TopUpAmountsCents = []int64{100_00, 500_00, 2000_00, 10000_00}

// Lots bounds.
const (
	MinLots = 1
	MaxLots = 10
)

// Password length bounds, in characters (not bytes).
const (
	MinPasswordLen = 15
	MaxPasswordLen = 128
)

// Order statuses. The payment and provisioning steps are separate: "paid" never
// implies the machine is ready; only "active" does.
const (
	StatusAwaitingPayment    = "awaiting_payment"
	StatusPaymentDetected    = "payment_detected" // seen on chain, not yet confirmed
	StatusPaid               = "paid"
	StatusWaitingForMachine  = "waiting_for_machine" // paid, no free machine: waits in line, in payment order
	StatusProvisioning       = "provisioning"
	StatusProvisioningFailed = "provisioning_failed" // waiting for support
	StatusActive             = "active"              // access available, period running
	StatusEnding             = "ending"              // teardown running
	StatusEnded              = "ended"
	StatusCancelled          = "cancelled"
	StatusExpired            = "expired" // unpaid too long
	StatusRefunded           = "refunded"
)

// Top-up statuses.
const (
	TopUpAwaitingPayment = "awaiting_payment"
	TopUpPaymentDetected = "payment_detected"
	TopUpCredited        = "credited"
	TopUpExpired         = "expired"
	TopUpCancelled       = "cancelled"
)

// CatalogItem is one GPU model the shop rents, with its lot prices per duration.
type CatalogItem struct {
	Model       string         `json:"model" db:"model"`
	DisplayName string         `json:"display_name" db:"display_name"`
	Vendor      string         `json:"vendor" db:"vendor"`
	MemoryGB    int            `json:"memory_gb" db:"memory_gb"`
	GPUsPerLot  int            `json:"gpus_per_lot" db:"gpus_per_lot"`
	Prices      map[int]int64  `json:"-" db:"-"` // duration days -> lot price in cents
	Enabled     bool           `json:"-" db:"enabled"`
	PriceList   []CatalogPrice `json:"prices" db:"-"`
}

// CatalogPrice is a lot price for one duration.
type CatalogPrice struct {
	DurationDays int    `json:"duration_days"`
	LotCents     int64  `json:"lot_price_cents"`
	LotUSD       string `json:"lot_price_usd"`
}

// Configuration is what the customer configures before ordering.
type Configuration struct {
	Model        string `json:"gpu_model"`
	Lots         int    `json:"lots"`
	DurationDays int    `json:"duration_days"`
	Preset       string `json:"preset"`
}

// Quote is a priced configuration.
type Quote struct {
	Configuration
	GPUsPerLot int    `json:"gpus_per_lot"`
	TotalGPUs  int    `json:"total_gpus"`
	LotCents   int64  `json:"lot_price_cents"`
	LotUSD     string `json:"lot_price_usd"`
	TotalCents int64  `json:"total_cents"`
	TotalUSD   string `json:"total_usd"`
	MemoryGB   int    `json:"memory_gb_per_gpu"`
	// SSHPublicKey is the customer's own key for the order (validated,
	// normalised), not part of the price.
	SSHPublicKey string `json:"-"`
}

// Availability says whether a configuration can be sold right now: the
// same calculation refuses a payment request when nothing is free, and
// other orders' capacity holds count as taken (postgres.Capacity).
type Availability struct {
	AvailableNow bool `json:"available_now"`
	// FreeNow counts what is free for this configuration: whole hosts with
	// the SSH driver, GPUs with the local driver.
	FreeNow int `json:"free_now"`
	// HostSizes lists the GPU counts of the model's hosts (SSH driver): an
	// order takes one whole host, so only these sizes can be ordered.
	HostSizes []int `json:"host_sizes,omitempty"`
	// Fits is false when no host in service has exactly this many GPUs:
	// such an order is refused (the configurator does not offer it).
	Fits bool `json:"fits"`
	// Message says in French why the configuration cannot be served now and
	// what to do; empty when it is available.
	Message string `json:"message,omitempty"`
}

// Account is a customer account.
type Account struct {
	ID        int64     `json:"id" db:"id"`
	FirstName string    `json:"first_name" db:"first_name"`
	LastName  string    `json:"last_name" db:"last_name"`
	Email     string    `json:"email" db:"email"`
	CreatedAt time.Time `json:"created_at" db:"created_at"`
	// EmailVerified: the customer opened the confirmation link sent to
	// Email. Until then the account gets no other mail and holds at most
	// one unpaid order.
	EmailVerified bool `json:"email_verified" db:"email_verified"`
}

// Order is a rental order as stored.
type Order struct {
	Ref       string `json:"reference" db:"ref"`
	AccountID int64  `json:"-" db:"account_id"`
	Model     string `json:"gpu_model" db:"gpu_model"`
	// ModelName is the catalog's display name of Model ("NVIDIA B200").
	ModelName     string  `json:"gpu_model_name,omitempty" db:"gpu_model_name"`
	Lots          int     `json:"lots" db:"lots"`
	GPUsPerLot    int     `json:"gpus_per_lot" db:"gpus_per_lot"`
	TotalGPUs     int     `json:"total_gpus" db:"total_gpus"`
	DurationDays  int     `json:"duration_days" db:"duration_days"`
	Preset        string  `json:"preset" db:"preset"`
	LotCents      int64   `json:"lot_price_cents" db:"lot_cents"`
	TotalCents    int64   `json:"total_cents" db:"total_cents"`
	Status        string  `json:"status" db:"status"`
	PaymentMethod *string `json:"payment_method" db:"payment_method"`
	PaidCents     int64   `json:"paid_cents" db:"paid_cents"`
	RefundedCents int64   `json:"refunded_cents" db:"refunded_cents"`
	// UnbackedCents were attributed by support without a received payment:
	// counted, never refundable.
	UnbackedCents int64 `json:"-" db:"unbacked_cents"`
	// ShortfallCents were refunded on payments a deep reorganisation
	// removed since: support's to recover (see ExceptionReverted).
	ShortfallCents int64 `json:"-" db:"shortfall_cents"`
	// LateCents are confirmed payments not counted (after the request's
	// deadline) still in support's queue (derived from it).
	LateCents int64 `json:"late_cents" db:"late_cents"`
	// ComputeStack is the model's compute stack, as the FAQ says it: "cuda"
	// (NVIDIA) or "rocm" (AMD); the customer's application must support it.
	ComputeStack string `json:"compute_stack" db:"compute_stack"`
	// LinePosition is the paid order's place in the line of orders
	// waiting for a machine of its model and size (1: the next served),
	// read live; 0 when it does not wait.
	LinePosition      int        `json:"line_position,omitempty" db:"line_position"`
	PaidAt            *time.Time `json:"paid_at" db:"paid_at"`
	PeriodStart       *time.Time `json:"period_start" db:"period_start"`
	PeriodEnd         *time.Time `json:"period_end" db:"period_end"`
	EndedAt           *time.Time `json:"ended_at" db:"ended_at"`
	SSHPublicKey      *string    `json:"ssh_public_key,omitempty" db:"ssh_public_key"`
	WorkflowID        string     `json:"workflow_id" db:"workflow_id"`
	WorkflowStartedAt *time.Time `json:"-" db:"workflow_started_at"`
	CreatedAt         time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at" db:"updated_at"`
}

// TimelineEvent is one entry of an order's (or top-up's) tracking.
type TimelineEvent struct {
	ID      int64           `json:"id" db:"id"`
	Ref     string          `json:"-" db:"ref"`
	Kind    string          `json:"kind" db:"kind"`
	Message string          `json:"message" db:"message"`
	Data    json.RawMessage `json:"data,omitempty" db:"data"`
	At      time.Time       `json:"at" db:"at"`
}

// Access is what the customer needs to reach the machine. Shown to the
// order's owner only; secrets are stored sealed and opened for the owner.
type Access struct {
	Host     string `json:"host" db:"host"`
	Port     int    `json:"port" db:"port"`
	Username string `json:"username" db:"username"`
	Password string `json:"password,omitempty" db:"password"`
	// PrivateKey is the generated key (OpenSSH PEM), shown once to the
	// owner, then erased; PrivateKeyShownAt says when.
	PrivateKey        string     `json:"private_key,omitempty" db:"-"`
	PrivateKeyShownAt *time.Time `json:"private_key_shown_at,omitempty" db:"private_key_shown_at"`
	// PrivateKeyAvailable: a generated key can be revealed now (POST
	// /v1/orders/{ref}/private-key); reading the order never reveals it.
	PrivateKeyAvailable bool    `json:"private_key_available" db:"-"`
	KeyFingerprint      *string `json:"key_fingerprint,omitempty" db:"key_fingerprint"`
	JupyterURL          *string `json:"jupyter_url,omitempty" db:"jupyter_url"`
	JupyterToken        string  `json:"jupyter_token,omitempty" db:"-"`
	GPUModel            string  `json:"gpu_model_seen" db:"gpu_model_seen"`
	GPUCount            int     `json:"gpu_count_seen" db:"gpu_count_seen"`
	Driver              string  `json:"driver_version" db:"driver_version"`
	// CUDA is the compute stack's version read on the machine: the CUDA
	// version on NVIDIA, "ROCm x.y" on AMD (see StackVersion).
	CUDA      string     `json:"cuda_version" db:"cuda_version"`
	Notes     string     `json:"notes" db:"notes"`
	CreatedAt time.Time  `json:"created_at" db:"created_at"`
	RevokedAt *time.Time `json:"revoked_at" db:"revoked_at"`
}

// StackVersion names the compute stack with its version, as the order
// shows it: "CUDA 12.4" on NVIDIA, "ROCm 6.2.0-66" on AMD.
func (a Access) StackVersion() string {
	if a.CUDA == "" || strings.HasPrefix(a.CUDA, "ROCm") {
		return a.CUDA
	}
	return "CUDA " + a.CUDA
}

// TopUp is a balance top-up request.
type TopUp struct {
	Ref         string     `json:"reference" db:"ref"`
	AccountID   int64      `json:"-" db:"account_id"`
	AmountCents int64      `json:"amount_cents" db:"amount_cents"`
	Status      string     `json:"status" db:"status"`
	CreditedAt  *time.Time `json:"credited_at" db:"credited_at"`
	// ReceivedCents is what its workflow counted toward it so far (the
	// API shows it beside the top-up).
	ReceivedCents     int64      `json:"-" db:"received_cents"`
	WorkflowID        string     `json:"workflow_id" db:"workflow_id"`
	WorkflowStartedAt *time.Time `json:"-" db:"workflow_started_at"`
	CreatedAt         time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at" db:"updated_at"`
	// ExtensionRef is the rental extension this top-up pays (its amount
	// is the extension's), of order ExtensionOrderRef; nil for a plain
	// top-up.
	ExtensionRef      *string `json:"extension_reference,omitempty" db:"extension_ref"`
	ExtensionOrderRef *string `json:"extension_order_reference,omitempty" db:"extension_order_ref"`
	// ExtensionState is that extension's (ExtensionReserved, Paid, Lapsed).
	ExtensionState string `json:"extension_state,omitempty" db:"extension_state"`
}

// Balance is a customer's balance. Pending top-ups are shown apart: they are
// not available.
type Balance struct {
	AvailableCents int64  `json:"available_cents"`
	AvailableUSD   string `json:"available_usd"`
	// DebtCents is what the balance owes (it is then 0 available): money
	// paid out to it on a payment the chain removed and already spent.
	// The next credits cover it first.
	DebtCents          int64  `json:"debt_cents"`
	DebtUSD            string `json:"debt_usd"`
	PendingTopUpsCents int64  `json:"pending_topups_cents"`
	PendingTopUpsUSD   string `json:"pending_topups_usd"`
}

// SupportRequest is a customer's request for help on an order.
type SupportRequest struct {
	ID            int64     `json:"id" db:"id"`
	OrderRef      string    `json:"order_reference" db:"order_ref"`
	AccountID     int64     `json:"-" db:"account_id"`
	Message       string    `json:"message" db:"message"`
	LaunchCommand string    `json:"launch_command" db:"launch_command"`
	Versions      string    `json:"versions" db:"versions"`
	FirstError    string    `json:"first_error" db:"first_error"`
	Status        string    `json:"status" db:"status"`
	CreatedAt     time.Time `json:"created_at" db:"created_at"`
}

// SupportAction is one audited action of a support agent.
type SupportAction struct {
	ID        int64           `json:"id" db:"id"`
	Agent     string          `json:"agent" db:"agent"`
	Action    string          `json:"action" db:"action"`
	TargetRef string          `json:"target" db:"target_ref"`
	Reason    string          `json:"reason" db:"reason"`
	Params    json.RawMessage `json:"params" db:"params"`
	Outcome   *string         `json:"outcome" db:"outcome"`
	Detail    *string         `json:"detail" db:"detail"`
	CreatedAt time.Time       `json:"created_at" db:"created_at"`
	DoneAt    *time.Time      `json:"done_at" db:"done_at"`
	// MoneyCents is what the action moves (credited or counted): it counts
	// toward its agent's daily cap (four_eyes.go).
	MoneyCents int64 `json:"money_cents" db:"money_cents"`
	// NeedsApproval: carried out only once a second agent approved it.
	NeedsApproval bool `json:"needs_approval" db:"needs_approval"`
	Review
}

// SupportActionClaim is what a support update says of the audited action
// it carries out: the workflow has its support_actions row checked against
// it before anything changes, so a sealed update copied from another
// workflow's history, or naming an action recorded for something else,
// does nothing.
type SupportActionClaim struct {
	ID        int64
	TargetRef string
	Action    string
	Agent     string
	// Params are the numbers the row's params must hold with these values
	// (amount_cents, days, exception_id).
	Params map[string]int64 `json:",omitempty"`
}

// Check refuses a row that is not the claimed action: another target,
// kind, agent or amount, or an action whose outcome is already written
// (carried out and closed: a replay).
func (a SupportAction) Check(c SupportActionClaim) error {
	bad := func(what string) error {
		return Errorf(ECodeInvalid, "L'action de support %d ne correspond pas à cette demande (%s).", c.ID, what)
	}
	switch {
	case a.ID != c.ID:
		return bad("identifiant")
	case a.TargetRef != c.TargetRef:
		return bad("dossier")
	case a.Action != c.Action:
		return bad("type")
	case a.Agent != c.Agent:
		return bad("agent")
	case a.Outcome != nil:
		return bad("déjà close")
	case a.NeedsApproval && (a.Approved == nil || !*a.Approved):
		return bad("sans l'accord d'un second agent")
	}
	var params map[string]json.Number
	dec := json.NewDecoder(bytes.NewReader(a.Params))
	dec.UseNumber()
	if len(a.Params) > 0 {
		if err := dec.Decode(&params); err != nil {
			return bad("paramètres illisibles")
		}
	}
	for k, want := range c.Params {
		got, err := params[k].Int64()
		if err != nil && want == 0 {
			continue // absent and zero: "all that remains"
		}
		if err != nil || got != want {
			return bad(k)
		}
	}
	return nil
}

// Support action names.
const (
	ActionAttributePayment  = "attribute_payment"
	ActionExtend            = "extend"
	ActionEndEarly          = "end_early"
	ActionRetryProvisioning = "retry_provisioning"
	ActionCancel            = "cancel"
	ActionRefund            = "refund"
	ActionRefundException   = "refund_exception"
	ActionResolveException  = "resolve_exception"
	ActionValueException    = "value_exception"
	// Operators' actions on a GPU host of the SSH driver (target_ref
	// HostTargetPrefix + the host's name).
	ActionRepairHost = "repair_host"
	ActionRetireHost = "retire_host"
	// ActionCloseHostFlag closes a host its customer made dirty on
	// purpose (target_ref: the order's reference).
	ActionCloseHostFlag = "close_host_flag"
	// ActionCodecSeal is a payload sealed by the codec endpoint for a
	// workflow (target_ref: the workflow ID), to send it with a Temporal
	// client.
	ActionCodecSeal = "codec_seal"
)

// CustomerAgent is the agent of an action the customer takes on their own
// order through the same audited path as support's (support_actions):
// "client:" and the account's ID. No agent is named so: an agent's name
// holds no colon (KERNODECK_SUPPORT_TOKENS is agent:token pairs).
func CustomerAgent(accountID int64) string {
	return fmt.Sprintf("%s%d", customerAgentPrefix, accountID)
}

const customerAgentPrefix = "client:"

// ByCustomer reports whether agent is a customer acting on their order.
func ByCustomer(agent string) bool { return strings.HasPrefix(agent, customerAgentPrefix) }

// HostTargetPrefix prefixes a host's name in support_actions.target_ref,
// so that no host name reads as an order's or a top-up's reference.
const HostTargetPrefix = "host:"

// NewRef returns a new public reference with the given prefix, e.g. KD-7QX2M4ZP9A.
// Crockford base32 without ambiguous letters, 10 characters (50 bits).
func NewRef(prefix string) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	var sb strings.Builder
	sb.WriteString(prefix)
	sb.WriteByte('-')
	for _, c := range b {
		sb.WriteByte(alphabet[int(c)%32])
	}
	return sb.String()
}

// Reference prefixes.
const (
	OrderRefPrefix = "KD"
	TopUpRefPrefix = "TU"
)

// Balance movement kinds (the ledger transaction kinds that touch a
// customer's balance).
const (
	MovementTopUp        = "topup"         // a confirmed top-up, credited
	MovementOrderPayment = "order_payment" // a rental paid from the balance, debited
	MovementRefund       = "refund"        // money refunded to the balance
	MovementReversal     = "reversal"      // paid out on a payment the chain removed: taken back (or given back once mined again)
	MovementPayout       = "payout"        // a payout's amount held (debit), or given back when it is cancelled or declined (credit); its final debit leaves the balance alone
	// MovementExtension is a rental extension paid from the balance (an
	// order payment whose event is the extension's).
	MovementExtension = "extension_payment"
)

// BalanceMovement is one credit or debit of a customer's balance: positive
// credits it, negative debits it. Ref is the order or top-up concerned.
type BalanceMovement struct {
	Kind        string    `json:"kind" db:"kind"`
	Ref         string    `json:"reference" db:"ref"`
	AmountCents int64     `json:"amount_cents" db:"amount_cents"`
	AmountUSD   string    `json:"amount_usd" db:"-"`
	At          time.Time `json:"at" db:"at"`
}

// OrderRecord is an order with everything its owner reads of it: its
// timeline, its payment requests (newest first, with their claims), the
// payments seen on chain for each request (by request ID, not reverted,
// oldest first), and its access once the machine is ready (nil before).
type OrderRecord struct {
	Order    Order
	Timeline []TimelineEvent
	Intents  []Intent
	Payments map[string][]IntentPayment
	Access   *Access
	// MachineHold says whether a machine is held for the order while it is
	// unpaid (awaiting payment, or a payment seen); nil otherwise.
	MachineHold *MachineHold
}

// SessionOrder is a valid session's account and CSRF token with one of
// that account's orders, read together.
type SessionOrder struct {
	Account   Account
	CSRFToken string
	Order     OrderRecord
	// Page is what only the order's page shows, when it was read for it.
	Page *OrderPageParts
}

// OrderPageParts is what an order's page shows beside its record: the
// customer's support requests on it, and the latest change of its access
// key (nil: none).
type OrderPageParts struct {
	SupportRequests []SupportRequest
	KeyRequest      *KeyRequest
}
