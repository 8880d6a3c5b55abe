package domain

import (
	"reflect"
	"testing"
	"time"
)

// TestChangesOrderSeesEveryOrderField: every field of OrderEvent that is
// not the event itself or the money it moves is a change of the order, and
// ChangesOrder reports it (a field added without it would be dropped by
// the store, which skips the order's UPDATE for events changing nothing).
func TestChangesOrderSeesEveryOrderField(t *testing.T) {
	notTheOrder := map[string]bool{
		"OrderRef": true, "Key": true, "Kind": true, "Message": true, "Data": true, "At": true,
		"Posting": true, "Exceptions": true, "Use": true, "Reversal": true,
	}
	typ := reflect.TypeFor[OrderEvent]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var ev OrderEvent
		v := reflect.ValueOf(&ev).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.Map:
			v.Set(reflect.MakeMap(f.Type))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(f.Type, 1, 1))
		case reflect.Struct:
			v.Set(reflect.ValueOf(time.Now())) // At, the only struct
		default:
			t.Fatalf("field %s: kind %s not covered", f.Name, v.Kind())
		}
		if got := ev.ChangesOrder(); got == notTheOrder[f.Name] {
			t.Errorf("%s set: ChangesOrder() = %v", f.Name, got)
		}
	}
}
