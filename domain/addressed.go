package domain

// Addressed names the workflow a sealed workflow input is meant for (its
// workflow ID: rental-<ref>, topup-<ref>, settlement-<ref>). Every signal
// and update argument embeds it and the sender (wfclient, the chain
// watchers) sets it; the worker refuses an input addressed to another
// workflow. The seal proves who wrote a payload, not where it was sent: a
// payload copied out of one workflow's history and sent unchanged to
// another still opens, and only this field, inside the seal, tells.
type Addressed struct {
	Target string `json:",omitempty"`
}

// AddressedTo is the workflow ID the input is for.
func (a Addressed) AddressedTo() string { return a.Target }
