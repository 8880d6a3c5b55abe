package api

import (
	"context"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/kernodeck/kernodeck/domain"
)

// TestOpenAPIPayoutSchemasAreTheGoTypes checks each payout schema of the
// document against the JSON of the Go type the handlers encode or decode:
// a value with every field set has exactly the schema's properties, nested
// objects and arrays included, of the schema's types; a zero value still
// carries every required property. A field added, renamed or dropped on
// either side fails here (a response schema alone accepts unknown fields).
func TestOpenAPIPayoutSchemasAreTheGoTypes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"PayoutAsk":            domain.PayoutAsk{},
		"PayoutQuote":          payoutQuoteResponse{},
		"PayoutConfirmRequest": requestPayoutRequest{},
		"Payout":               domain.Payout{},
		"PayoutEvent":          domain.PayoutEvent{},
		"PayoutDetail":         PayoutView{},
		"PayoutList":           payoutsResponse{},
		"PayoutBatchRequest":   openBatchRequest{},
		"SignedBatchRequest":   signedBatchRequest{},
		"PayoutBatch":          domain.PayoutBatch{},
		"PayoutBatchExport":    domain.BatchExport{},
		"PayoutBatchDetail":    BatchView{},
	} {
		t.Run(name, func(t *testing.T) {
			s := doc.Components.Schemas[name]
			if s == nil {
				t.Fatalf("no schema %s", name)
			}
			full := reflect.New(reflect.TypeOf(v)).Elem()
			fill(full)
			matchSchema(t, name, s.Value, jsonOf(t, full.Interface()), true)
			matchSchema(t, name, s.Value, jsonOf(t, v), false)
		})
	}
	// The support list's item is the customers' Payout.
	items := doc.Components.Schemas["SupportPayoutList"].Value.Properties["payouts"].Value.Items
	if items.Ref != "#/components/schemas/Payout" {
		t.Errorf("SupportPayoutList's payouts are %q, not Payout", items.Ref)
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// fill sets every field of v that JSON would omit when empty: pointers to a
// filled value, slices to one filled element, strings to a word. Types
// that encode themselves (times, big integers) keep their zero value.
func fill(v reflect.Value) {
	if v.CanAddr() {
		if _, ok := v.Addr().Interface().(json.Marshaler); ok {
			return
		}
		if _, ok := v.Addr().Interface().(encoding.TextMarshaler); ok {
			return
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.String:
		v.SetString("x")
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// properties are an object schema's properties and required names, its
// allOf parts merged.
func properties(s *openapi3.Schema) (map[string]*openapi3.SchemaRef, []string) {
	props := map[string]*openapi3.SchemaRef{}
	required := slices.Clone(s.Required)
	for name, p := range s.Properties {
		props[name] = p
	}
	for _, part := range s.AllOf {
		pp, rr := properties(part.Value)
		for name, p := range pp {
			props[name] = p
		}
		required = append(required, rr...)
	}
	return props, required
}

// matchSchema compares a decoded JSON value with a schema: with full (every
// field set), the object's keys are exactly the schema's properties and the
// values are of the schema's types; always, every required key is there.
func matchSchema(t *testing.T, at string, s *openapi3.Schema, v any, full bool) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		props, required := properties(s)
		for _, name := range required {
			if _, ok := x[name]; !ok {
				t.Errorf("%s: required %q is not in the Go type's JSON", at, name)
			}
		}
		if !full {
			return
		}
		var inGo, inDoc []string
		for k := range x {
			inGo = append(inGo, k)
		}
		for k := range props {
			inDoc = append(inDoc, k)
		}
		sort.Strings(inGo)
		sort.Strings(inDoc)
		if !slices.Equal(inGo, inDoc) {
			t.Errorf("%s: the Go type's JSON has %v, the schema %v", at, inGo, inDoc)
		}
		for k, val := range x {
			if p := props[k]; p != nil {
				matchSchema(t, at+"."+k, p.Value, val, full)
			}
		}
	case []any:
		if s.Items == nil {
			t.Errorf("%s: an array in Go, not in the schema", at)
			return
		}
		for _, e := range x {
			matchSchema(t, at+"[]", s.Items.Value, e, full)
		}
	default:
		if !full || v == nil {
			return
		}
		// The scalar's type only: the document's enums and formats are
		// not what a filled placeholder holds.
		scalar := &openapi3.Schema{Type: s.Type, Nullable: s.Nullable}
		if err := scalar.VisitJSON(v); err != nil {
			t.Errorf("%s: %v", at, err)
		}
	}
}
