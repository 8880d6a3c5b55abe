package memo_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kernodeck/kernodeck/memo"
)

type inner struct {
	Name  string
	Count int64
	When  *time.Time
	Raw   json.RawMessage
	Flag  bool
	Ratio float64
}

type outer struct {
	Title   string
	Items   []inner
	ByName  map[string]inner
	Ptr     *inner
	Any     any
	Stamp   time.Time
	Small   uint8
	hidden  string // read by a method a template may call
	Nothing *inner
	Empty   []string
}

func (o outer) Hidden() string { return o.hidden }

func fresh() outer {
	at := time.Date(2026, 12, 7, 14, 0, 0, 5, time.UTC)
	return outer{
		Title:  "Commande",
		Items:  []inner{{Name: "a", Count: 1, When: &at, Raw: json.RawMessage(`{"x":1}`), Ratio: 0.5}, {Name: "b", Flag: true}},
		ByName: map[string]inner{"k1": {Name: "one"}, "k2": {Name: "two", Count: 2}},
		Ptr:    &inner{Name: "p", Count: 7},
		Any:    inner{Name: "dyn"},
		Stamp:  at,
		Small:  3,
		hidden: "secret",
	}
}

func key(t *testing.T, v any) memo.Key {
	t.Helper()
	k, ok := memo.Digest("page", v)
	if !ok {
		t.Fatalf("%#v: not digestible", v)
	}
	return k
}

// leaves visits every settable leaf of v (a pointer's target), by path.
func leaves(v reflect.Value, path string, visit func(path string, leaf reflect.Value)) {
	switch v.Kind() {
	case reflect.Interface: // its value cannot be set: changed whole below
	case reflect.Pointer:
		if !v.IsNil() {
			leaves(v.Elem(), path+"*", visit)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			visit(path, v)
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				leaves(v.Field(i), path+"."+v.Type().Field(i).Name, visit)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			visit(path, v)
			return
		}
		for i := range v.Len() {
			leaves(v.Index(i), path+"[]", visit)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			visit(path+"["+k.String()+"]", v) // a map's values are changed whole
		}
	default:
		visit(path, v)
	}
}

// Any one value changed anywhere in the data changes the key: the memo can
// only serve what was made from exactly the same data.
func TestDigestChangesWithEveryValue(t *testing.T) {
	base := key(t, fresh())
	if key(t, fresh()) != base {
		t.Fatal("the same data (other pointers, a map built again) gave another key")
	}
	var paths []string
	o := fresh()
	leaves(reflect.ValueOf(&o).Elem(), "", func(p string, _ reflect.Value) { paths = append(paths, p) })
	if len(paths) < 15 {
		t.Fatalf("only %d leaves visited: %v", len(paths), paths)
	}
	for i, p := range paths {
		o := fresh()
		n := 0
		leaves(reflect.ValueOf(&o).Elem(), "", func(_ string, leaf reflect.Value) {
			if n++; n-1 != i {
				return
			}
			switch leaf.Kind() {
			case reflect.String:
				leaf.SetString(leaf.String() + "x")
			case reflect.Bool:
				leaf.SetBool(!leaf.Bool())
			case reflect.Int64, reflect.Int:
				leaf.SetInt(leaf.Int() + 1)
			case reflect.Uint8:
				leaf.SetUint(leaf.Uint() + 1)
			case reflect.Float64:
				leaf.SetFloat(leaf.Float() + 1)
			case reflect.Slice:
				leaf.SetBytes(append(append([]byte{}, leaf.Bytes()...), ' '))
			case reflect.Struct: // a time
				leaf.Set(reflect.ValueOf(leaf.Interface().(time.Time).Add(time.Nanosecond)))
			case reflect.Map:
				leaf.SetMapIndex(reflect.ValueOf(p[len(p)-3:len(p)-1]), reflect.ValueOf(inner{Name: "changed"}))
			default:
				t.Fatalf("%s: no change for %s", p, leaf.Kind())
			}
		})
		if key(t, o) == base {
			t.Errorf("changing %s left the key unchanged", p)
		}
	}
}

// What json or a shallow look would miss changes the key too.
func TestDigestSeesWhatIsEasyToMiss(t *testing.T) {
	base := key(t, fresh())
	for name, change := range map[string]func(*outer){
		"an unexported field":           func(o *outer) { o.hidden = "other" },
		"nil slice against empty":       func(o *outer) { o.Empty = []string{} },
		"nil pointer against zero":      func(o *outer) { o.Nothing = &inner{} },
		"the dynamic type of an any":    func(o *outer) { o.Any = struct{ Name string }{"dyn"} },
		"the same instant in Paris":     func(o *outer) { o.Stamp = o.Stamp.In(time.FixedZone("CET", 3600)) },
		"the value of an any":           func(o *outer) { o.Any = inner{Name: "dyn", Count: 1} },
		"an item moved":                 func(o *outer) { o.Items[0], o.Items[1] = o.Items[1], o.Items[0] },
		"a string moved between fields": func(o *outer) { o.Items[1].Name, o.Title = o.Title, o.Items[1].Name },
		"a map key renamed":             func(o *outer) { o.ByName["k3"] = o.ByName["k2"]; delete(o.ByName, "k2") },
	} {
		o := fresh()
		change(&o)
		if key(t, o) == base {
			t.Errorf("%s: key unchanged", name)
		}
	}
	if k, _ := memo.Digest("other", fresh()); k == base {
		t.Error("another name, same key")
	}
}

func TestDigestRefusesWhatItCannotSee(t *testing.T) {
	type cyclic struct{ Next *cyclic }
	c := &cyclic{}
	c.Next = c
	for name, v := range map[string]any{
		"a function":         struct{ F func() }{func() {}},
		"a channel":          struct{ C chan int }{make(chan int)},
		"a map by int":       map[int]string{1: "a"},
		"a cycle":            c,
		"an unexported time": struct{ t time.Time }{time.Now()},
	} {
		if _, ok := memo.Digest("page", v); ok {
			t.Errorf("%s: digested", name)
		}
	}
}

func TestMemoBounded(t *testing.T) {
	m := memo.New[int](3)
	for i := range 7 {
		k, _ := memo.Digest("n", i)
		m.Put(k, i)
		if m.Len() > 3 {
			t.Fatalf("%d entries over a bound of 3", m.Len())
		}
		if got, ok := m.Get(k); !ok || got != i {
			t.Fatalf("Get after Put: %d %v", got, ok)
		}
	}
}
