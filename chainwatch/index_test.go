package chainwatch

import (
	"strings"
	"testing"
)

func TestIndexHas(t *testing.T) {
	x := NewIndex()
	x.Add(
		KnownAddress{Seq: 1, Address: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"},
		KnownAddress{Seq: 3, Address: "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01"},
		KnownAddress{Seq: 2, Address: "TJCnKsPa7y5okkXvQAidZBzqx3QyQ6sxMW"},
	)
	if x.Len() != 3 || x.MaxSeq() != 3 {
		t.Fatalf("len %d, max seq %d", x.Len(), x.MaxSeq())
	}
	for _, a := range []string{
		"bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
		"0xabcdef0123456789abcdef0123456789abcdef01", // EVM: any case
		"0XABCDEF0123456789ABCDEF0123456789ABCDEF01",
		"TJCnKsPa7y5okkXvQAidZBzqx3QyQ6sxMW",
	} {
		if !x.Has(a) {
			t.Errorf("%s not found", a)
		}
	}
	for _, a := range []string{
		"tjcnkspa7y5okkxvqaidzbzqx3qyq6sxmw", // base58 is case-sensitive
		"bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdQ",
		"",
		strings.Repeat("0x", 100),
	} {
		if x.Has(a) {
			t.Errorf("%q found", a)
		}
	}
	if n := testing.AllocsPerRun(100, func() { x.Has("0xABCDEF0123456789abcdef0123456789abcdef01") }); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
}
