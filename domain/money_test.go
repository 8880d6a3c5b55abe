package domain

import (
	"errors"
	"strings"
	"testing"
)

// CheckRefund is the one rule that keeps a refund within what was received
// and not yet kept or refunded: a cent above is refused, and the message
// never offers a negative maximum.
func TestCheckRefund(t *testing.T) {
	for _, c := range []struct {
		name               string
		amount, refundable int64
		refused            bool
		maxShown           string
	}{
		{name: "all that is left", amount: 2357, refundable: 2357},
		{name: "part of it", amount: 1, refundable: 2357},
		{name: "one cent over", amount: 2358, refundable: 2357, refused: true, maxShown: "23.57 USD au plus"},
		{name: "nothing left", amount: 1, refundable: 0, refused: true, maxShown: "0.00 USD au plus"},
		{name: "more refunded than received", amount: 1, refundable: -500, refused: true, maxShown: "0.00 USD au plus"},
		{name: "a large amount against a small one", amount: MaxSupportCents, refundable: 100, refused: true, maxShown: "1.00 USD au plus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRefund(c.amount, c.refundable)
			if !c.refused {
				if err != nil {
					t.Fatalf("CheckRefund(%d, %d) = %v, want nil", c.amount, c.refundable, err)
				}
				return
			}
			var de *Error
			if !errors.As(err, &de) || de.Code != ECodeConflict {
				t.Fatalf("CheckRefund(%d, %d) = %v, want a %s error", c.amount, c.refundable, err, ECodeConflict)
			}
			if !strings.Contains(de.Message, c.maxShown) {
				t.Errorf("message %q lacks %q", de.Message, c.maxShown)
			}
		})
	}
}

// A refund's amount alone: positive and at most MaxSupportCents.
func TestRefundValidateParams(t *testing.T) {
	for amount, ok := range map[int64]bool{
		-1: false, 0: false, 1: true, MaxSupportCents: true, MaxSupportCents + 1: false,
	} {
		err := Refund{AmountCents: amount}.ValidateParams()
		if (err == nil) != ok {
			t.Errorf("amount %d: %v, want accepted=%v", amount, err, ok)
		}
	}
}
