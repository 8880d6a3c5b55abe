package openapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// generate is how client_gen_test.go is made, from the repository's root
// (scripts/gen-openapi-client.sh runs it): oapi-codegen's default output
// for types and a client, in a test file of this package.
var generate = []string{"-generate", "types,client", "-package", "openapi", "api/openapi.yaml"}

// The committed client is what the pinned generator makes of today's
// document: a change to api/openapi.yaml that breaks generated clients
// fails here or in TestGeneratedClientRentsAMachine.
func TestGeneratedClientIsCurrent(t *testing.T) {
	bin, err := exec.LookPath("oapi-codegen")
	if err != nil {
		gopath, gerr := exec.Command("go", "env", "GOPATH").Output()
		bin = filepath.Join(string(bytes.TrimSpace(gopath)), "bin", "oapi-codegen")
		if _, serr := os.Stat(bin); gerr != nil || serr != nil {
			t.Fatal("oapi-codegen not installed: run scripts/ensure-tools.sh")
		}
	}
	cmd := exec.Command(bin, generate...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, stderr.String())
	}
	committed, err := os.ReadFile("client_gen_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, committed) {
		t.Fatal("e2e/openapi/client_gen_test.go is not what oapi-codegen makes of api/openapi.yaml: run scripts/gen-openapi-client.sh")
	}
}
