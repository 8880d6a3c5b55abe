package domain

import (
	"database/sql/driver"
	"fmt"
	"math/big"
)

// BigInt is an arbitrary-precision integer stored as NUMERIC and sent as a
// JSON string (crypto base units exceed int64 and JSON numbers' precision).
type BigInt struct{ big.Int }

// NewBigInt wraps a *big.Int.
func NewBigInt(v *big.Int) BigInt {
	var b BigInt
	b.Set(v)
	return b
}

// Value implements driver.Valuer.
func (b BigInt) Value() (driver.Value, error) { return b.String(), nil }

// Scan implements sql.Scanner for NUMERIC columns.
func (b *BigInt) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case []byte:
		s = string(v)
	case string:
		s = v
	case int64:
		b.SetInt64(v)
		return nil
	default:
		return fmt.Errorf("BigInt: cannot scan %T", src)
	}
	if _, ok := b.SetString(s, 10); !ok {
		return fmt.Errorf("BigInt: bad integer %q", s)
	}
	return nil
}

// MarshalJSON renders the integer as a JSON string.
func (b BigInt) MarshalJSON() ([]byte, error) { return []byte(`"` + b.String() + `"`), nil }

// UnmarshalJSON reads a JSON string or number.
func (b *BigInt) UnmarshalJSON(p []byte) error {
	s := string(p)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	if _, ok := b.SetString(s, 10); !ok {
		return fmt.Errorf("BigInt: bad integer %q", s)
	}
	return nil
}
