package domain

import "time"

// HostReservation is one host an order held with the SSH driver, as
// support sees it: the machine, its state now, the customer's account on
// it, what verification saw, and how the reservation ended.
type HostReservation struct {
	HostName string `json:"host_name" db:"host_name"`
	// HostState and HostNote are the host's now (available, reserved,
	// in_use, draining, broken and why); empty once the host was removed.
	HostState string     `json:"host_state" db:"host_state"`
	HostNote  string     `json:"host_note" db:"host_note"`
	UnixUser  string     `json:"unix_user" db:"unix_user"`
	State     string     `json:"state" db:"state"` // active, released, failed
	Failure   *string    `json:"failure" db:"failure"`
	Prepared  *time.Time `json:"prepared_at" db:"prepared_at"`
	GPUModel  *string    `json:"gpu_model_seen" db:"gpu_model_seen"`
	GPUCount  *int       `json:"gpu_count_seen" db:"gpu_count_seen"`
	Driver    *string    `json:"driver_version" db:"driver_version"`
	CUDA      *string    `json:"cuda_version" db:"cuda_version"`
	// CustomerFlag is what the customer did to make the host dirty (their
	// home given to another uid...), reported by the teardown; FlagClosedAt
	// is when support closed it (nil: open, in support's queue).
	CustomerFlag *string    `json:"customer_flag" db:"customer_flag"`
	FlagClosedAt *time.Time `json:"customer_flag_closed_at" db:"customer_flag_closed_at"`
	CreatedAt    time.Time  `json:"created_at" db:"created_at"`
	Released     *time.Time `json:"released_at" db:"released_at"`
}
