// Package docs holds the checks of the documentation against the code.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	// envName is a variable name as the code spells it; one ending in "_"
	// is a prefix the code completes (an account key's network...).
	envName = regexp.MustCompile(`KERNODECK_[A-Z0-9_]+`)
	// envBuilt is a name the code builds around a network:
	// "KERNODECK_" + network + "_NODE_URL".
	envBuilt = regexp.MustCompile(`"KERNODECK_"\s*\+[^"\n]*\+\s*"(_[A-Z0-9_]+)"`)
)

// spelledInRepo returns each KERNODECK_ name, prefix or built pattern
// written in the repository's Go files (tests included: they read their
// own switches) and shell scripts, with the first file that spells it.
// A built name is returned as "KERNODECK_<>_SUFFIX".
func spelledInRepo(t *testing.T, root string) map[string]string {
	t.Helper()
	found := map[string]string{}
	add := func(name, path string) {
		if _, ok := found[name]; !ok {
			found[name] = path
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor", "testdata", ".dev", ".screenshots":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".sh") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range envName.FindAllString(string(raw), -1) {
			add(name, path)
		}
		for _, m := range envBuilt.FindAllStringSubmatch(string(raw), -1) {
			add("KERNODECK_<>"+m[1], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// documented reports whether doc names the variable: the whole name (not a
// longer one it begins); for a prefix, its pattern "PREFIX<NETWORK>"; for a
// built name, "KERNODECK_<NETWORK>_SUFFIX" (any word in the brackets).
func documented(doc, name string) bool {
	switch {
	case strings.HasPrefix(name, "KERNODECK_<>"):
		suffix := strings.TrimPrefix(name, "KERNODECK_<>")
		return regexp.MustCompile(`KERNODECK_<[A-Z]+>` + regexp.QuoteMeta(suffix) + `\b`).MatchString(doc)
	case strings.HasSuffix(name, "_"):
		return regexp.MustCompile(regexp.QuoteMeta(name) + `<[A-Z]+>`).MatchString(doc)
	}
	return regexp.MustCompile(regexp.QuoteMeta(name) + `\b`).MatchString(doc)
}

// missingFrom lists, sorted, the variables of where that doc does not name.
func missingFrom(doc string, where map[string]string) []string {
	var missing []string
	for name, file := range where {
		if !documented(doc, name) {
			missing = append(missing, name+" (in "+file+")")
		}
	}
	sort.Strings(missing)
	return missing
}

// TestConfigurationDocListsEveryVariable fails, listing them, when a
// KERNODECK_ variable the code or the scripts read is missing from
// docs/configuration.md.
func TestConfigurationDocListsEveryVariable(t *testing.T) {
	raw, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	where := spelledInRepo(t, "..")
	if len(where) < 80 {
		t.Fatalf("found only %d variables in the repository: is it walked from its root?", len(where))
	}
	if missing := missingFrom(string(raw), where); len(missing) > 0 {
		t.Fatalf("docs/configuration.md lacks %d variable(s) the code reads; add each with its default and meaning "+
			"(a prefix the code completes as PREFIX<NETWORK>, a name built around a network as KERNODECK_<NETWORK>_SUFFIX):\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// TestConfigurationDocCheckFindsAGap: the check above fails on a page that
// lacks a variable, a prefix's pattern or a built name's pattern, and does
// not take a longer name for a shorter one.
func TestConfigurationDocCheckFindsAGap(t *testing.T) {
	where := map[string]string{
		"KERNODECK_SUPPORT_TOKEN":  "a.go",
		"KERNODECK_XPUB_":          "b.go",
		"KERNODECK_<>_NODE_URL":    "c.go",
		"KERNODECK_HTTP_ADDR":      "d.go",
		"KERNODECK_EXPLORER_URL_":  "e.go",
		"KERNODECK_<>_KEY_NETWORK": "f.go",
	}
	doc := "`KERNODECK_SUPPORT_TOKENS` `KERNODECK_XPUB_BITCOIN` `KERNODECK_BITCOIN_NODE_URL` `KERNODECK_HTTP_ADDR` " +
		"`KERNODECK_EXPLORER_URL_<NETWORK>` `KERNODECK_<NETWORK>_KEY_NETWORK`"
	got := strings.Join(missingFrom(doc, where), "; ")
	want := "KERNODECK_<>_NODE_URL (in c.go); KERNODECK_SUPPORT_TOKEN (in a.go); KERNODECK_XPUB_ (in b.go)"
	if got != want {
		t.Fatalf("missing:\n got %s\nwant %s", got, want)
	}
}
