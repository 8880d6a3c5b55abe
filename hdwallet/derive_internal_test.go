package hdwallet

import (
	"errors"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/hdkeychain"
)

// TestBIP32PublicDerivation runs BIP32 test vectors 1 and 2 through the
// package's own decoding (version normalisation included) and public-only
// derivation: the non-hardened children must match the vectors' ext pub,
// and hardened children must be impossible without the private key.
// Source: https://github.com/bitcoin/bips/blob/master/bip-0032.mediawiki
func TestBIP32PublicDerivation(t *testing.T) {
	const h = hdkeychain.HardenedKeyStart
	cases := []struct {
		name   string
		parent string
		path   []uint32
		want   string
	}{
		{
			name:   "vector 1 m/0H/1/2H -> /2 -> /1000000000",
			parent: "xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5",
			path:   []uint32{2, 1000000000},
			want:   "xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy",
		},
		{
			name:   "vector 1 m/0H/1/2H -> /2",
			parent: "xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5",
			path:   []uint32{2},
			want:   "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV",
		},
		{
			name:   "vector 1 m/0H -> /1",
			parent: "xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp1bgwQ9xv5ski8PX9rL2dZXvgGDnw",
			path:   []uint32{1},
			want:   "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ",
		},
		{
			name:   "vector 2 m -> /0",
			parent: "xpub661MyMwAqRbcFW31YEwpkMuc5THy2PSt5bDMsktWQcFF8syAmRUapSCGu8ED9W6oDMSgv6Zz8idoc4a6mr8BDzTJY47LJhkJ8UB7WEGuduB",
			path:   []uint32{0},
			want:   "xpub69H7F5d8KSRgmmdJg2KhpAK8SR3DjMwAdkxj3ZuxV27CprR9LgpeyGmXUbC6wb7ERfvrnKZjXoUmmDznezpbZb7ap6r1D3tgFxHmwMkQTPH",
		},
		{
			name:   "vector 2 m/0/2147483647H/1/2147483646H -> /2",
			parent: "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL",
			path:   []uint32{2},
			want:   "xpub6FnCn6nSzZAw5Tw7cgR9bi15UV96gLZhjDstkXXxvCLsUXBGXPdSnLFbdpq8p9HmGsApME5hQTZ3emM2rnY5agb9rXpVGyy3bdW6EEgAtqt",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key, _, err := decodeExtendedPublicKey(c.parent)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range c.path {
				if key, err = key.Derive(i); err != nil {
					t.Fatal(err)
				}
			}
			if key.String() != c.want {
				t.Fatalf("got %s\nwant %s", key, c.want)
			}
		})
	}

	// The child of vector 1's m/0H/1 is m/0H/1/2H, and vector 2's m/0 has
	// m/0/2147483647H: hardened, so out of reach of a watch-only key.
	for _, parent := range []string{
		"xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ",
		"xpub69H7F5d8KSRgmmdJg2KhpAK8SR3DjMwAdkxj3ZuxV27CprR9LgpeyGmXUbC6wb7ERfvrnKZjXoUmmDznezpbZb7ap6r1D3tgFxHmwMkQTPH",
	} {
		key, _, err := decodeExtendedPublicKey(parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []uint32{2 + h, 2147483647 + h} {
			if _, err := key.Derive(i); !errors.Is(err, hdkeychain.ErrDeriveHardFromPublic) {
				t.Errorf("hardened derivation from a public key: err = %v", err)
			}
		}
	}
}

// TestAccountUsesExternalChain checks that Address(i) is m/.../0/i of the
// account key, using vector 1's depth-3 key m/0H/1/2H as the account.
func TestAccountUsesExternalChain(t *testing.T) {
	a, err := ParseAccountKey(Bitcoin, "xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5")
	if err != nil {
		t.Fatal(err)
	}
	ext, err := a.account.Derive(0)
	if err != nil {
		t.Fatal(err)
	}
	child, err := ext.Derive(5)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := child.ECPubKey()
	if err != nil {
		t.Fatal(err)
	}
	want, err := p2wpkhAddress("bc", btcutil.Hash160(pub.SerializeCompressed()))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Address(5); err != nil || got != want {
		t.Fatalf("Address(5) = %s, %v; want %s", got, err, want)
	}
}
