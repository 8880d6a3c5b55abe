package secrets_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/kernodeck/kernodeck/secrets"
)

func TestSealOpenAndRotation(t *testing.T) {
	oldSpec := secrets.Generate("k1")
	old, err := secrets.Parse(oldSpec)
	if err != nil {
		t.Fatal(err)
	}
	sealed := old.Seal("hunter2-long-password", "order_access.password:KD-1")
	if !secrets.IsSealed(sealed) || strings.Contains(sealed, "hunter2") || secrets.KeyID(sealed) != "k1" {
		t.Fatalf("sealed value %q", sealed)
	}
	// Rotation: a new key first seals, the old one still opens.
	rotated, err := secrets.Parse(secrets.Generate("k2") + "," + oldSpec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealed, "order_access.password:KD-1"); err != nil || got != "hunter2-long-password" {
		t.Fatalf("open after rotation = %q, %v", got, err)
	}
	if id := secrets.KeyID(rotated.Seal("x", "a")); id != "k2" {
		t.Fatalf("new values sealed with %q, want k2", id)
	}
	// Bound to its place: another row's AAD does not open it.
	if _, err := rotated.Open(sealed, "order_access.password:KD-2"); err == nil {
		t.Fatal("ciphertext moved to another row opened")
	}
	// Once the old key is dropped, its values no longer open.
	onlyNew, _ := secrets.Parse(secrets.Generate("k2"))
	if _, err := onlyNew.Open(sealed, "order_access.password:KD-1"); err == nil {
		t.Fatal("opened without its key")
	}
}

func TestParseRefusesBadKeys(t *testing.T) {
	for _, spec := range []string{"", "k1", "k1:short", "bad id:" + strings.Repeat("A", 44), secrets.Generate("k") + "," + secrets.Generate("k")} {
		if _, err := secrets.Parse(spec); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}

// TestParseErrorsNeverShowTheKey feeds malformed KERNODECK_SECRET_KEYS
// values (the error is printed at startup and kept in the journal): each is
// refused, its error names the wrong entry's position, and it contains no
// run of 6 characters of the key material (the base64 after the ':', or an
// entry without its ':', which may be a key alone).
func TestParseErrorsNeverShowTheKey(t *testing.T) {
	good := secrets.Generate("k1")
	_, key, _ := strings.Cut(good, ":")
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	for _, c := range []struct {
		name, spec, secret, entry string
	}{
		{"key without id", key, key, "entry 1"},
		{"id and key swapped", key + ":k1", key, "entry 1"},
		{"second entry without ':'", good + ",k2" + key, "k2" + key, "entry 2"},
		{"key with a space", "k1:" + key[:20] + " " + key[20:], key, "entry 1"},
		{"key with a bad character", "k1:" + key[:10] + "!" + key[11:], key, "entry 1"},
		{"URL-safe base64", "k1:" + base64.RawURLEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw), "entry 1"},
		{"truncated key", "k1:" + key[:20], key[:20], "entry 1"},
		{"31 bytes", "k1:" + b64(raw[:31]), b64(raw[:31]), "entry 1"},
		{"33 bytes", "k1:" + b64(append(raw[:32:32], 7)), b64(append(raw[:32:32], 7)), "entry 1"},
		{"id with a slash", "k1/" + key[:8] + ":" + key, key, "entry 1"},
		{"the whole value quoted", `"` + good + `"`, key, "entry 1"},
		{"second key malformed", good + ",k2:" + key[:30], key[:30], "entry 2"},
	} {
		_, err := secrets.Parse(c.spec)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.entry) {
			t.Errorf("%s: error %q does not name %s", c.name, msg, c.entry)
		}
		for i := 0; i+6 <= len(c.secret); i++ {
			if strings.Contains(msg, c.secret[i:i+6]) {
				t.Errorf("%s: error %q shows %q of the key", c.name, msg, c.secret[i:i+6])
				break
			}
		}
	}
}
