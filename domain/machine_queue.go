package domain

import "time"

// WaitingOrder is a paid order in the line for a machine (status
// StatusWaitingForMachine), as support sees it. Its line is the orders of
// the same model and size (GPUModel, TotalGPUs) in payment order (paid_at,
// then reference); Position 1 is served next. Waited is counted from the
// payment.
type WaitingOrder struct {
	Ref           string    `json:"reference" db:"ref"`
	Position      int       `json:"position" db:"position"`
	Model         string    `json:"gpu_model" db:"gpu_model"`
	TotalGPUs     int       `json:"total_gpus" db:"total_gpus"`
	Email         string    `json:"customer_email" db:"email"`
	PaidCents     int64     `json:"paid_cents" db:"paid_cents"`
	PaidAt        time.Time `json:"paid_at" db:"paid_at"`
	WaitedSeconds int64     `json:"waited_seconds" db:"waited_seconds"`
}
