// Package memo remembers what a pure function made of a value (a page
// rendered from its data, a JSON answer encoded from its view) under the
// digest of that value, so that a read whose data did not change skips the
// work. It knows nothing of where the value came from: the digest covers
// every field it holds, exported or not, so no source of change can be
// forgotten, and a value it cannot digest is simply not remembered.
package memo

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Key is the SHA-256 digest of a value and the name of what was made from
// it. A cryptographic hash: values are partly written by customers, and a
// collision would show one customer's page to another.
type Key [sha256.Size]byte

// errOpaque: the value holds something whose content cannot be digested
// (a function, a channel, a map keyed by something other than strings, a
// cycle); what is made from it is not remembered.
var errOpaque = errors.New("memo: value cannot be digested")

// maxDepth bounds the walk (a cycle through pointers never ends).
const maxDepth = 64

// Digest is the Key of v under name (what is made of v: a template's name,
// an encoding). ok false when v cannot be digested.
func Digest(name string, v any) (k Key, ok bool) {
	d := digester{h: sha256.New(), buf: make([]byte, 0, 4096)}
	d.str(name)
	if err := d.value(reflect.ValueOf(v), 0); err != nil {
		return k, false
	}
	d.flush()
	d.h.Sum(k[:0])
	return k, true
}

var timeType = reflect.TypeFor[time.Time]()

// digester writes a canonical encoding of a value into h: each value is
// preceded by its kind (so that, say, a nil pointer and a pointer to zero
// differ) and each string or sequence by its length.
type digester struct {
	h   hash.Hash
	buf []byte
}

func (d *digester) flush() {
	d.h.Write(d.buf)
	d.buf = d.buf[:0]
}

func (d *digester) tag(k reflect.Kind) {
	if len(d.buf) > 3500 {
		d.flush()
	}
	d.buf = append(d.buf, byte(k))
}

func (d *digester) u64(u uint64) { d.buf = binary.LittleEndian.AppendUint64(d.buf, u) }

func (d *digester) str(s string) {
	d.u64(uint64(len(s)))
	if len(s) > 512 {
		d.flush()
		d.h.Write([]byte(s))
		return
	}
	d.buf = append(d.buf, s...)
}

func (d *digester) value(v reflect.Value, depth int) error {
	if depth > maxDepth {
		return errOpaque
	}
	if !v.IsValid() {
		d.tag(reflect.Invalid)
		return nil
	}
	k := v.Kind()
	d.tag(k)
	switch k {
	case reflect.Bool:
		if v.Bool() {
			d.u64(1)
		} else {
			d.u64(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d.u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		d.u64(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		d.u64(math.Float64bits(real(c)))
		d.u64(math.Float64bits(imag(c)))
	case reflect.String:
		d.str(v.String())
	case reflect.Slice:
		if v.IsNil() {
			d.u64(math.MaxUint64)
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			d.str(string(v.Bytes()))
			return nil
		}
		fallthrough
	case reflect.Array:
		d.u64(uint64(v.Len()))
		for i := range v.Len() {
			if err := d.value(v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		if v.IsNil() {
			d.u64(0)
			return nil
		}
		d.u64(1)
		return d.value(v.Elem(), depth+1)
	case reflect.Interface:
		if v.IsNil() {
			d.u64(0)
			return nil
		}
		// The dynamic type counts: two types may hold the same fields and
		// be shown differently.
		e := v.Elem()
		d.u64(1)
		d.str(e.Type().PkgPath() + "." + e.Type().String())
		return d.value(e, depth+1)
	case reflect.Map:
		return d.mapValue(v, depth)
	case reflect.Struct:
		if v.Type() == timeType {
			return d.time(v)
		}
		for i := range v.NumField() {
			if err := d.value(v.Field(i), depth+1); err != nil {
				return err
			}
		}
	default: // func, chan, unsafe pointer
		return errOpaque
	}
	return nil
}

// mapValue digests a map with string keys in the keys' order (Go's map
// order is random: the digest must not be).
func (d *digester) mapValue(v reflect.Value, depth int) error {
	if v.Type().Key().Kind() != reflect.String {
		return errOpaque
	}
	if v.IsNil() {
		d.u64(math.MaxUint64)
		return nil
	}
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	d.u64(uint64(len(keys)))
	for _, key := range keys {
		d.str(key.String())
		if err := d.value(v.MapIndex(key), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// time digests an instant with its zone: the offset and the location's
// name (a page may show either), not the location's transition tables.
func (d *digester) time(v reflect.Value) error {
	if !v.CanInterface() {
		return errOpaque // an unexported time.Time: its fields hide a pointer
	}
	t := v.Interface().(time.Time)
	name, offset := t.Zone()
	d.u64(uint64(t.Unix()))
	d.u64(uint64(t.Nanosecond()))
	d.u64(uint64(offset))
	d.str(name)
	d.str(t.Location().String())
	return nil
}

// String shows a key briefly (logs, tests).
func (k Key) String() string { return fmt.Sprintf("%x", k[:8]) }
