package domain

import "time"

// StuckOrder is an order whose provisioning failed and waits for support
// (retry, refund, cancel), in support's queue.
type StuckOrder struct {
	Ref        string    `json:"reference" db:"ref"`
	Email      string    `json:"customer_email" db:"email"`
	Model      string    `json:"gpu_model" db:"gpu_model"`
	TotalGPUs  int       `json:"total_gpus" db:"total_gpus"`
	TotalCents int64     `json:"total_cents" db:"total_cents"`
	PaidCents  int64     `json:"paid_cents" db:"paid_cents"`
	Since      time.Time `json:"since" db:"since"`
}
