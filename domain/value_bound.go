package domain

import "time"

// ValueBound is the range support's value of a payment received in another
// asset must fall in (ExceptionValue): its amount at the rate observed
// nearest to its reception, within the rate window (rates.ValueWindow),
// give or take the tolerance (KERNODECK_VALUE_TOLERANCE). Known is false
// when no rate of the asset was observed in the window: then only a value
// a second agent approved is accepted.
type ValueBound struct {
	Known      bool      `json:"known"`
	Asset      string    `json:"asset"`
	AmountBase string    `json:"amount_base_units"`
	Decimals   int32     `json:"decimals"`
	ReceivedAt time.Time `json:"received_at"`
	// The observation used (Known): USD per whole unit, its source and time.
	Rate       string    `json:"rate_usd_per_unit,omitempty"`
	RateSource string    `json:"rate_source,omitempty"`
	ObservedAt time.Time `json:"rate_observed_at,omitzero"`
	Tolerance  string    `json:"tolerance"` // a fraction: "0.02" is 2 %
	MinCents   int64     `json:"min_cents"`
	MaxCents   int64     `json:"max_cents"`
}

// Allows reports whether cents is within the bound (Known only).
func (b ValueBound) Allows(cents int64) bool {
	return b.Known && cents >= b.MinCents && cents <= b.MaxCents
}
