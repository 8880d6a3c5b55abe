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

// HostFlag is a host its customer made dirty on purpose (what the
// teardown reported: their home given to another uid, an IPC object given
// away...), in support's queue until an agent closes it
// (ActionCloseHostFlag). The teardown undid it where it could: HostState
// says whether the host went back to the pool.
type HostFlag struct {
	OrderRef  string    `json:"reference" db:"order_ref"`
	Email     string    `json:"customer_email" db:"email"`
	HostName  string    `json:"host_name" db:"host_name"`
	HostState string    `json:"host_state" db:"host_state"`
	UnixUser  string    `json:"unix_user" db:"unix_user"`
	Flag      string    `json:"customer_flag" db:"customer_flag"`
	Since     time.Time `json:"since" db:"since"`
}
