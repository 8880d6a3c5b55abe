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

// StuckTeardown is a rental whose teardown keeps failing (revoking the
// customer's access or releasing the machine): still ending, with a
// "teardown_stuck" event (EventTeardownStuck), in support's queue until
// the teardown completes (the order is then ended). Since is the event's
// time; Step and Error say what failed, as the event recorded it (empty
// when it did not); HostName is the host the order still holds (SSH
// driver; empty with none).
type StuckTeardown struct {
	StuckOrder
	Step     string `json:"step" db:"step"`
	Error    string `json:"error" db:"error"`
	HostName string `json:"host_name" db:"host_name"`
}
