package domain

import "time"

// Kinds of KeyRequest.
const (
	KeyRequestReplace = "replace" // the customer's own public key replaces the current one
	KeyRequestReissue = "reissue" // a new key pair is generated; its private key is revealed once
)

// States of KeyRequest.
const (
	KeyRequestPending = "pending"
	KeyRequestDone    = "done"
	KeyRequestFailed  = "failed"
)

// KeyRequest is a customer's request to change the SSH key of a running
// rental, applied on the host by the worker.
type KeyRequest struct {
	ID        int64      `json:"id" db:"id"`
	OrderRef  string     `json:"order_reference" db:"order_ref"`
	Kind      string     `json:"kind" db:"kind"`
	State     string     `json:"state" db:"state"`
	Failure   *string    `json:"failure,omitempty" db:"failure"`
	CreatedAt time.Time  `json:"created_at" db:"created_at"`
	DoneAt    *time.Time `json:"done_at,omitempty" db:"done_at"`
}
