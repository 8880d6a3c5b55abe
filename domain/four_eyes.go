package domain

import "time"

// No agent alone moves large money. A support action that credits a
// balance or counts money (MoneyActions) above the four-eyes threshold is
// recorded but carried out only once a second agent approves it; the
// agent who asked can neither approve nor see it run alone. Each agent
// also has a daily cap on the money their actions move (asked or
// approved, over the last 24 hours; refused, failed or declined actions
// do not count).

// Defaults of SupportLimits' zero fields.
const (
	DefaultFourEyesCents      = 100_00   // 100 USD
	DefaultAgentDailyCapCents = 5_000_00 // 5,000 USD
	AgentCapWindow            = 24 * time.Hour
)

// SupportLimits bound what one support agent moves alone.
type SupportLimits struct {
	// FourEyesCents: a money action above it waits for a second agent.
	FourEyesCents int64
	// AgentDailyCapCents: an agent's money actions (asked or approved)
	// within AgentCapWindow never exceed it.
	AgentDailyCapCents int64
}

// WithDefaults fills the zero fields.
func (l SupportLimits) WithDefaults() SupportLimits {
	if l.FourEyesCents <= 0 {
		l.FourEyesCents = DefaultFourEyesCents
	}
	if l.AgentDailyCapCents <= 0 {
		l.AgentDailyCapCents = DefaultAgentDailyCapCents
	}
	return l
}

// NeedsSecondAgent reports whether moving cents takes a second agent.
func (l SupportLimits) NeedsSecondAgent(cents int64) bool { return cents > l.FourEyesCents }

// Review is a second agent's decision on an action that needed one,
// written once, before any outcome.
type Review struct {
	ReviewedBy   *string    `json:"reviewed_by,omitempty" db:"reviewed_by"`
	ReviewReason *string    `json:"review_reason,omitempty" db:"review_reason"`
	Approved     *bool      `json:"approved,omitempty" db:"approved"`
	ReviewedAt   *time.Time `json:"reviewed_at,omitempty" db:"reviewed_at"`
}

// OutcomeDeclined ends an action a second agent declined (nothing ran).
const OutcomeDeclined = "declined"

// AwaitingApproval reports whether a waits for a second agent.
func (a SupportAction) AwaitingApproval() bool {
	return a.NeedsApproval && a.ReviewedBy == nil && a.Outcome == nil
}

// ErrAwaitingApproval answers an action recorded but not carried out: it
// waits for a second agent (202).
func ErrAwaitingApproval(id int64) *Error {
	return Errorf(ECodeAwaitingApproval,
		"L'action n° %d déplace plus que ce qu'un agent peut faire seul : elle est enregistrée et attend l'accord d'un second agent. "+
			"Rien n'a encore changé.", id)
}
