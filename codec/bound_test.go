package codec_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
)

// inWorkflow is dc as the SDK uses it for workflow wid.
func inWorkflow(dc converter.DataConverter, wid string) converter.DataConverter {
	return converter.WithDataConverterSerializationContext(dc,
		converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: wid})
}

// A payload sealed for no workflow opens in none once UnboundUntil has
// passed (never, by default), outside a workflow still (history exports),
// and before UnboundUntil for the histories recorded before the binding.
func TestPayloadSealedForNoWorkflowOpensInNone(t *testing.T) {
	k := keyring(t)
	unbound, err := codec.DataConverter(k).ToPayload("confirmed")
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := inWorkflow(codec.DataConverter(k), "rental-KD-A").FromPayload(unbound, &s); !errors.Is(err, codec.ErrUnbound) || s != "" {
		t.Fatalf("unbound payload in a workflow: %q %v, want ErrUnbound", s, err)
	}
	if err := codec.DataConverter(k).FromPayload(unbound, &s); err != nil || s != "confirmed" {
		t.Fatalf("outside a workflow: %q %v", s, err)
	}
	s = ""
	until := codec.DataConverter(k, codec.UnboundUntil(time.Now().Add(time.Hour)))
	if err := inWorkflow(until, "rental-KD-A").FromPayload(unbound, &s); err != nil || s != "confirmed" {
		t.Fatalf("before UnboundUntil: %q %v", s, err)
	}
	past := codec.DataConverter(k, codec.UnboundUntil(time.Now().Add(-time.Hour)))
	if err := inWorkflow(past, "rental-KD-A").FromPayload(unbound, &s); !errors.Is(err, codec.ErrUnbound) {
		t.Fatalf("after UnboundUntil: %v, want ErrUnbound", err)
	}
	bound, err := inWorkflow(codec.DataConverter(k), "rental-KD-A").ToPayload("confirmed")
	if err != nil {
		t.Fatal(err)
	}
	if err := inWorkflow(codec.DataConverter(k), "rental-KD-A").FromPayload(bound, &s); err != nil {
		t.Fatalf("bound payload in its workflow: %v", err)
	}
}

// The endpoint seals only for a named workflow, with a reason, audited as
// a support action before it seals; what it seals opens in that workflow
// only.
func TestEncodeSealsForANamedWorkflowAudited(t *testing.T) {
	k := keyring(t)
	db := pgtest.NewDB(t)
	const token = "agent-token-0123456789"
	srv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(k, "/codec", codec.HandlerOptions{
		AgentTokens: map[string]string{token: "alice"}, Audit: db})))
	defer srv.Close()
	plain := &commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"confirmed"`)}}}
	body, _ := protojson.Marshal(plain)
	encode := func(wid, reason string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/codec/encode", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if wid != "" {
			req.Header.Set(codec.HeaderWorkflowID, wid)
		}
		if reason != "" {
			req.Header.Set(codec.HeaderReason, reason)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	audited := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM support_actions WHERE action = 'codec_seal'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if code, _ := encode("", "relance du paiement"); code != http.StatusBadRequest {
		t.Fatalf("encode for no workflow: %d, want 400", code)
	}
	if code, _ := encode("rental-KD-A", ""); code != http.StatusBadRequest {
		t.Fatalf("encode without a reason: %d, want 400", code)
	}
	if n := audited(); n != 0 {
		t.Fatalf("%d seals audited for refused encodes", n)
	}
	code, out := encode("rental-KD-A", "relance du paiement")
	if code != http.StatusOK {
		t.Fatalf("encode: %d %s", code, out)
	}
	var sealed commonpb.Payloads
	if err := protojson.Unmarshal(out, &sealed); err != nil || len(sealed.Payloads) != 1 {
		t.Fatalf("sealed payloads: %v %s", err, out)
	}
	var row struct {
		Agent, Target, Reason, Outcome string
	}
	if err := db.Get(&row, `SELECT agent, target_ref AS target, reason, outcome FROM support_actions
		WHERE action = 'codec_seal'`); err != nil {
		t.Fatal(err)
	}
	if row.Agent != "alice" || row.Target != "rental-KD-A" || row.Reason != "relance du paiement" || row.Outcome != "done" {
		t.Fatalf("audit row: %+v", row)
	}
	var s string
	if err := inWorkflow(codec.DataConverter(k), "rental-KD-A").FromPayload(sealed.Payloads[0], &s); err != nil || s != "confirmed" {
		t.Fatalf("sealed payload in its workflow: %q %v", s, err)
	}
	if err := inWorkflow(codec.DataConverter(k), "rental-KD-B").FromPayload(sealed.Payloads[0], &s); !errors.Is(err, codec.ErrMisaddressed) {
		t.Fatalf("sealed payload in another workflow: %v, want ErrMisaddressed", err)
	}
}

// Without an audit store the endpoint seals nothing.
func TestEncodeWithoutAuditRefused(t *testing.T) {
	k := keyring(t)
	const token = "agent-token-0123456789"
	srv := httptest.NewServer(http.StripPrefix("/codec", codec.Handler(k, "/codec", codec.HandlerOptions{
		AgentTokens: map[string]string{token: "alice"}})))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/codec/encode", bytes.NewReader([]byte(`{"payloads":[]}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(codec.HeaderWorkflowID, "rental-KD-A")
	req.Header.Set(codec.HeaderReason, "relance du paiement")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("encode without audit: %d, want 403", resp.StatusCode)
	}
}
