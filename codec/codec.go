// Package codec encrypts every Temporal payload (workflow inputs, activity
// arguments and results, signals, updates, memos, failure details) with
// AES-256-GCM before it leaves the process, so the Temporal server and its
// Web UI only ever hold ciphertext. Operators read payloads through the
// codec HTTP endpoint (Handler), authenticated with support agent tokens.
//
// The seal is also the authenticity check: anyone who can reach the
// Temporal frontend can send a signal or an update, but only a holder of
// the keyring can seal one. Workers and clients therefore refuse unsealed
// payloads (ErrUnsealed): a forged update is rejected before its handler
// runs, a forged signal is dropped by the SDK (logged as a corrupted signal,
// counted in corrupted_signals) and the workflow goes on.
package codec

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/kernodeck/kernodeck/secrets"
)

// Metadata of an encrypted payload.
const (
	// Encoding marks a payload this codec sealed.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the keyring key that sealed it.
	MetadataKeyID = "encryption-key-id"
	// MetadataWorkflowID names the workflow a payload was sealed for; the
	// ciphertext is bound to it (associated data), so the name cannot be
	// changed without breaking the seal.
	MetadataWorkflowID = "encryption-workflow-id"
	// aad binds ciphertexts to this use of the keyring.
	aad = "temporal-payload"
)

// ErrMisaddressed is the decoding error of a payload sealed for another
// workflow than the one decoding it: copied out of one workflow's history
// and sent to another.
var ErrMisaddressed = errors.New("codec: payload sealed for another workflow refused")

// ErrUnbound is the decoding error, within a workflow's context, of a
// payload sealed for no workflow (as the codec endpoint sealed before it
// required one): past UnboundUntil, only payloads sealed for the workflow
// decoding them open.
var ErrUnbound = errors.New("codec: payload sealed for no workflow refused")

// ErrUnsealed is the decoding error of a payload this codec did not seal.
var ErrUnsealed = errors.New("codec: unsealed payload refused (only holders of the keyring may send payloads)")

// Codec is a converter.PayloadCodec sealing payloads with a keyring.
type Codec struct {
	Keyring *secrets.Keyring
	// AcceptUnsealed lets unsealed payloads through as they are. Only for
	// showing histories (the codec endpoint, history exports), where a
	// forged payload must stay readable to be investigated; never on a
	// worker or a client.
	AcceptUnsealed bool
	// Logger records each refused payload (nil: slog.Default()).
	Logger *slog.Logger
	// UnboundUntil is when payloads sealed for no workflow stop opening
	// within a workflow's context (zero: they never do). Histories
	// recorded before the binding (history versions below 7, vAddressed)
	// hold such payloads: set it past the close of the last of their runs
	// (kernodeck versions) while any is open.
	UnboundUntil time.Time
	// Now is the clock UnboundUntil is read against (nil: time.Now).
	Now func() time.Time

	// workflowID is the workflow the SDK is encoding or decoding for
	// (WithSerializationContext); "" outside one.
	workflowID string
}

var (
	_ converter.PayloadCodec                         = (*Codec)(nil)
	_ converter.PayloadCodecWithSerializationContext = (*Codec)(nil)
)

// WithSerializationContext binds the codec to the workflow the SDK is
// working for (a workflow's input, signals, updates, queries, results,
// memo, and its activities' payloads): payloads it seals name that
// workflow and are bound to it, and it refuses payloads sealed for
// another. This is the second lock behind the address each input carries
// inside the seal (domain.Addressed).
func (c *Codec) WithSerializationContext(sc converter.SerializationContext) converter.PayloadCodec {
	bound := *c
	switch x := sc.(type) {
	case converter.WorkflowSerializationContext:
		bound.workflowID = x.WorkflowID
	case converter.ActivitySerializationContext:
		bound.workflowID = x.WorkflowID
	default:
		bound.workflowID = ""
	}
	return &bound
}

// aadFor is the associated data of a payload sealed for workflowID: the
// plain "temporal-payload" of payloads sealed before the binding, or
// outside any workflow (the codec endpoint's encode).
func aadFor(workflowID string) []byte {
	if workflowID == "" {
		return []byte(aad)
	}
	return []byte(aad + "\x00" + workflowID)
}

func (c *Codec) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Codec) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// Encode seals each payload (its metadata included) into a new payload.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		raw, err := p.Marshal()
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		id, sealed := c.Keyring.SealBytes(raw, aadFor(c.workflowID))
		md := map[string][]byte{
			converter.MetadataEncoding: []byte(Encoding),
			MetadataKeyID:              []byte(id),
		}
		if c.workflowID != "" {
			md[MetadataWorkflowID] = []byte(c.workflowID)
		}
		out[i] = &commonpb.Payload{Metadata: md, Data: sealed}
	}
	return out, nil
}

// Decode opens sealed payloads. An unsealed one is refused with ErrUnsealed
// (and logged, with its encoding only: never its data), unless
// AcceptUnsealed. Within a workflow's context, a payload sealed for another
// workflow is refused with ErrMisaddressed, and one sealed for no workflow
// with ErrUnbound (until UnboundUntil they still open, for the histories
// recorded before the binding; their inputs' own address is checked by
// the worker).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != Encoding {
			if c.AcceptUnsealed {
				out[i] = p
				continue
			}
			c.logger().Warn("unsealed Temporal payload refused: sent without the keyring", "encoding", enc, "bytes", len(p.GetData()))
			return nil, ErrUnsealed
		}
		sealedFor := string(p.GetMetadata()[MetadataWorkflowID])
		if sealedFor == "" && c.workflowID != "" && !c.AcceptUnsealed && !c.now().Before(c.UnboundUntil) {
			c.logger().Warn("Temporal payload sealed for no workflow refused", "workflow", c.workflowID)
			return nil, ErrUnbound
		}
		if sealedFor != "" && c.workflowID != "" && sealedFor != c.workflowID {
			c.logger().Warn("Temporal payload sealed for another workflow refused", "workflow", c.workflowID, "sealed_for", sealedFor)
			return nil, ErrMisaddressed
		}
		raw, err := c.Keyring.OpenBytes(string(p.GetMetadata()[MetadataKeyID]), p.GetData(), aadFor(sealedFor))
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		var dec commonpb.Payload
		if err := dec.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("codec: unmarshal payload: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// Option sets a Codec's field.
type Option func(*Codec)

// UnboundUntil sets Codec.UnboundUntil.
func UnboundUntil(t time.Time) Option { return func(c *Codec) { c.UnboundUntil = t } }

// DataConverter is the default data converter with payloads sealed.
func DataConverter(k *secrets.Keyring, opts ...Option) converter.DataConverter {
	c := &Codec{Keyring: k}
	for _, o := range opts {
		o(c)
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter also seals failure messages and stack traces (they can
// quote customer data), using the sealed data converter.
func FailureConverter(k *secrets.Keyring) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          DataConverter(k),
		EncodeCommonAttributes: true,
	})
}
