package api

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// workerOnlyCodes are codes that never reach an API answer, with why. A
// code added here needs the same proof.
var workerOnlyCodes = map[string]string{
	// Machine drivers (provision/...) classify provisioning failures for
	// the rental workflow's provisioning step, which retries them or hands
	// them to support; no API call waits on a provisioning activity.
	"verify_mismatch": "provisioning activities only",
	"host_refused":    "provisioning activities only",
}

// TestOpenAPIListsEveryErrorCode walks the module's Go source for every
// error code the code can produce and checks that the OpenAPI document's
// ErrorCode lists exactly those, and that each has a status of its own. A
// code is a constant named ECode* (in any package), or what is given as the
// Code of a domain.Error literal, the code of domain.Errorf or the code of
// writeError, when that is a string literal or a constant. A new code fails
// this test until it is documented (or shown to stay in the worker:
// workerOnlyCodes).
func TestOpenAPIListsEveryErrorCode(t *testing.T) {
	produced := producedErrorCodes(t, "..")
	for _, want := range []string{"invalid", "unsupported_media_type", "internal", "too_many_attempts"} {
		if !produced[want] {
			t.Fatalf("the source walk missed %q: it is broken (found %v)", want, sortedKeys(produced))
		}
	}

	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	schema := doc.Components.Schemas["ErrorCode"]
	if schema == nil || schema.Value == nil {
		t.Fatal("no ErrorCode schema in openapi.yaml")
	}
	documented := map[string]bool{}
	for _, v := range schema.Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("ErrorCode enum value %v is not a string", v)
		}
		documented[s] = true
	}

	for code := range workerOnlyCodes {
		if !produced[code] {
			t.Errorf("worker-only code %q is produced nowhere any more: drop it from workerOnlyCodes", code)
		}
		delete(produced, code)
	}
	var undocumented, stale []string
	for code := range produced {
		if !documented[code] {
			undocumented = append(undocumented, code)
		}
		if code != "internal" && statusFor(code) == http.StatusInternalServerError {
			t.Errorf("code %q has no status in statusFor (answered as 500)", code)
		}
	}
	for code := range documented {
		if !produced[code] {
			stale = append(stale, code)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(stale)
	if len(undocumented) > 0 {
		t.Errorf("codes the API can answer but api/openapi.yaml's ErrorCode does not list: %v", undocumented)
	}
	if len(stale) > 0 {
		t.Errorf("codes api/openapi.yaml's ErrorCode lists but nothing produces: %v", stale)
	}
}

// producedErrorCodes parses every non-test Go file under root.
func producedErrorCodes(t *testing.T, root string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	type pkgFiles struct {
		name  string
		files []*ast.File
	}
	pkgs := map[string]*pkgFiles{} // by directory
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if pkgs[dir] == nil {
			pkgs[dir] = &pkgFiles{name: f.Name.Name}
		}
		pkgs[dir].files = append(pkgs[dir].files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Package-level string constants, by package name then constant name.
	consts := map[string]map[string]string{}
	codes := map[string]bool{}
	for _, p := range pkgs {
		if consts[p.name] == nil {
			consts[p.name] = map[string]string{}
		}
		for _, f := range p.files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						consts[p.name][name.Name] = v
						if strings.HasPrefix(name.Name, "ECode") {
							codes[v] = true
						}
					}
				}
			}
		}
	}

	// resolve gives the value of a code expression when it is a literal or
	// a constant; anything else (a variable passing a code on) is not a
	// new code.
	resolve := func(pkg string, e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				v, err := strconv.Unquote(x.Value)
				return v, err == nil
			}
		case *ast.Ident:
			v, ok := consts[pkg][x.Name]
			return v, ok
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				v, ok := consts[id.Name][x.Sel.Name]
				return v, ok
			}
		}
		return "", false
	}
	isDomain := func(pkg string, e ast.Expr, name string) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return pkg == "domain" && x.Name == name
		case *ast.SelectorExpr:
			id, ok := x.X.(*ast.Ident)
			return ok && id.Name == "domain" && x.Sel.Name == name
		}
		return false
	}
	for _, p := range pkgs {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CompositeLit:
					if !isDomain(p.name, x.Type, "Error") {
						return true
					}
					for _, el := range x.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
								if v, ok := resolve(p.name, kv.Value); ok {
									codes[v] = true
								}
							}
						}
					}
				case *ast.CallExpr:
					arg := -1
					switch {
					case isDomain(p.name, x.Fun, "Errorf"):
						arg = 0
					case p.name == "api" && isIdent(x.Fun, "writeError"):
						arg = 2
					}
					if arg >= 0 && arg < len(x.Args) {
						if v, ok := resolve(p.name, x.Args[arg]); ok {
							codes[v] = true
						}
					}
				}
				return true
			})
		}
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module root: %v", root, err)
	}
	return codes
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
