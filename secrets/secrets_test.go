package secrets_test

import (
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
