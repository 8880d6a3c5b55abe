package migrations

import (
	"io/fs"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// contractCutoff is the newest migration written before the expand/contract
// rule (docs/UPGRADING.md): older ones are history (00006 drops a column
// in its Up) and are never edited.
const contractCutoff = 66

// contractMarker names, in a migration's Up, the release that stopped
// using what it drops, renames or retypes: a version tag (v1.4.0) or a git
// revision. Written as a comment of its own, e.g.
//
//	-- contract: orders.late_cents unused since v1.4.0
var contractMarker = regexp.MustCompile(`(?m)^\s*--\s*contract:\s*(.+?)\s+unused since\s+(v\d+\.\d+\.\d+|[0-9a-f]{7,40})\s*$`)

// contractStatements are the Up statements a previous release, still
// running during the rollout or rolled back to, cannot survive: they take
// away a table, view or column it may read or write, or change a column's
// type under it. `ALTER TABLE t DROP c` without the COLUMN keyword is a
// column too.
var contractStatements = []struct {
	what string
	re   *regexp.Regexp
}{
	{"DROP TABLE/VIEW", regexp.MustCompile(`(?is)\bDROP\s+(?:MATERIALIZED\s+)?(?:TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?[^\s;]+`)},
	{"DROP COLUMN", regexp.MustCompile(`(?is)\bDROP\s+COLUMN\s+(?:IF\s+EXISTS\s+)?(?:"[^"]+"|[a-z_][a-z0-9_]*)`)},
	{"RENAME", regexp.MustCompile(`(?is)\bRENAME\b`)},
	{"ALTER ... TYPE", regexp.MustCompile(`(?is)\bALTER\s+(?:COLUMN\s+)?(?:"[^"]+"|[a-z_][a-z0-9_]*)\s+(?:SET\s+DATA\s+)?TYPE\b`)},
}

// alterTableDrop is a DROP clause of ALTER TABLE, and notAColumn what it
// may name besides a column (COLUMN itself is contractStatements').
var (
	alterTableDrop = regexp.MustCompile(`(?is)\bDROP\s+(?:IF\s+EXISTS\s+)?("[^"]+"|[a-z_][a-z0-9_]*)`)
	notAColumn     = regexp.MustCompile(`(?i)^(CONSTRAINT|DEFAULT|NOT|IDENTITY|EXPRESSION|COLUMN)$`)
)

// lockTimeoutOverride is anything in a migration that would undo the
// migration session's lock_timeout (postgres.MigrationLockTimeout), or
// let a statement wait forever another way.
var lockTimeoutOverride = regexp.MustCompile(`(?i)\b(lock_timeout|statement_timeout|set_config\s*\(\s*'lock_timeout'|RESET\s+ALL)\b`)

// stripComments removes SQL comments (-- to the end of the line, /* */)
// but keeps goose's annotations, which are comments too.
func stripComments(sql string) string {
	sql = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(sql, " ")
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "-- +goose") {
			b.WriteString(line + "\n")
			continue
		}
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// upSection is the migration's Up part: from `-- +goose Up` to `-- +goose
// Down` (or the end).
func upSection(sql string) string {
	if i := strings.Index(sql, "-- +goose Up"); i >= 0 {
		sql = sql[i:]
	}
	if i := strings.Index(sql, "-- +goose Down"); i >= 0 {
		sql = sql[:i]
	}
	return sql
}

// contractViolations lists what a migration's Up does that the previous
// release cannot run on, when no contract marker names the release that
// stopped using it.
func contractViolations(sql string) []string {
	up := upSection(sql)
	if contractMarker.MatchString(up) {
		return nil
	}
	code := stripComments(up)
	var found []string
	for _, st := range contractStatements {
		for _, m := range st.re.FindAllString(code, -1) {
			found = append(found, st.what+": "+strings.Join(strings.Fields(m), " "))
		}
	}
	// ALTER TABLE t DROP c: a column without the COLUMN keyword.
	plain := regexp.MustCompile(`(?m)^\s*-- \+goose.*$`).ReplaceAllString(code, "")
	for _, stmt := range strings.Split(plain, ";") {
		if !regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\b`).MatchString(stmt) {
			continue
		}
		for _, m := range alterTableDrop.FindAllStringSubmatch(stmt, -1) {
			if !notAColumn.MatchString(m[1]) {
				found = append(found, "DROP COLUMN: "+strings.Join(strings.Fields(m[0]), " "))
			}
		}
	}
	return found
}

// TestMigrationsExpandThenContract enforces part of docs/UPGRADING.md's
// rule mechanically. A migration newer than 00066 drops a table, view or
// column, renames anything, or changes a column's type in its Up only
// with a comment `-- contract: <what> unused since <release>` naming the
// release that stopped using it (a tag, or a revision this repository
// has), so the release before this one, which still runs during the
// rollout, does not lose what it reads. And no migration touches
// lock_timeout or statement_timeout: every DDL statement keeps the
// migration session's 10 s lock_timeout.
func TestMigrationsExpandThenContract(t *testing.T) {
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	numbered := regexp.MustCompile(`^(\d{5})_[a-z0-9_]+\.sql$`)
	checked := 0
	for _, e := range entries {
		m := numbered.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: not NNNNN_name.sql", e.Name())
			continue
		}
		raw, err := fs.ReadFile(FS, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		sql := string(raw)
		if l := lockTimeoutOverride.FindString(stripComments(sql)); l != "" {
			t.Errorf("%s sets %q: migrations run under the migration session's lock_timeout (docs/UPGRADING.md)", e.Name(), l)
		}
		if n, _ := strconv.Atoi(m[1]); n <= contractCutoff {
			continue
		}
		checked++
		for _, v := range contractViolations(sql) {
			t.Errorf("%s: %s in its Up, with no `-- contract: <what> unused since <release>` comment: the previous release still uses it during the rollout (docs/UPGRADING.md, expand then contract)", e.Name(), v)
		}
		if mk := contractMarker.FindStringSubmatch(upSection(sql)); mk != nil && !strings.HasPrefix(mk[2], "v") {
			if err := exec.Command("git", "cat-file", "-e", mk[2]+"^{commit}").Run(); err != nil {
				t.Errorf("%s: its contract comment names %s, not a commit of this repository", e.Name(), mk[2])
			}
		}
	}
	if checked == 0 {
		t.Errorf("no migration newer than %05d checked", contractCutoff)
	}
}

// TestContractViolationsFound: the check finds what it must. 00006's Up
// (its DROP COLUMN late_cents), numbered after the cutoff, fails it; the
// same with a contract comment passes; expanding statements and the Down
// section are not flagged.
func TestContractViolationsFound(t *testing.T) {
	raw, err := fs.ReadFile(FS, "00006_payment_exceptions.sql")
	if err != nil {
		t.Fatal(err)
	}
	got := contractViolations(string(raw))
	if want := []string{"DROP COLUMN: DROP COLUMN late_cents"}; !slices.Equal(got, want) {
		t.Errorf("00006's Up: %q, want %q", got, want)
	}
	for _, sql := range []string{
		"ALTER TABLE orders DROP late_cents;",
		"ALTER TABLE orders DROP IF EXISTS late_cents;",
		"ALTER TABLE orders ADD COLUMN x int, DROP COLUMN y;",
		"ALTER TABLE orders DROP CONSTRAINT c, DROP y;",
		"DROP TABLE IF EXISTS payment_exceptions;",
		"DROP VIEW order_lines;",
		"ALTER TABLE orders RENAME COLUMN a TO b;",
		"ALTER TABLE orders RENAME TO purchases;",
		"ALTER TABLE orders ALTER COLUMN total_cents TYPE numeric;",
		"ALTER TABLE orders ALTER total_cents SET DATA TYPE numeric;",
	} {
		if v := contractViolations("-- +goose Up\n" + sql + "\n"); len(v) == 0 {
			t.Errorf("%q not flagged", sql)
		}
		marked := "-- +goose Up\n-- contract: the old shape unused since v1.2.3\n" + sql + "\n"
		if v := contractViolations(marked); len(v) > 0 {
			t.Errorf("%q with a contract comment flagged: %q", sql, v)
		}
	}
	for _, sql := range []string{
		"ALTER TABLE orders ADD COLUMN x int NOT NULL DEFAULT 0;",
		"ALTER TABLE support_actions DROP CONSTRAINT support_actions_action_check, ADD CONSTRAINT c CHECK (action IN ('a','b'));",
		"ALTER TABLE orders ALTER COLUMN x DROP DEFAULT, ALTER COLUMN y DROP NOT NULL;",
		"CREATE TABLE t (kind text NOT NULL, type text);",
		"DROP INDEX IF EXISTS orders_by_status; DROP TRIGGER t ON orders;",
		"-- a comment: DROP TABLE orders\nSELECT 1;",
		"SELECT 1;\n-- +goose Down\nDROP TABLE orders;",
	} {
		if v := contractViolations("-- +goose Up\n" + sql + "\n"); len(v) > 0 {
			t.Errorf("%q flagged: %q", sql, v)
		}
	}
	for _, sql := range []string{"SET lock_timeout = 0;", "RESET lock_timeout;", "SET LOCAL statement_timeout = '1h';", "SELECT set_config('lock_timeout', '0', true);", "RESET ALL;"} {
		if !lockTimeoutOverride.MatchString(stripComments(sql)) {
			t.Errorf("%q not seen as overriding lock_timeout", sql)
		}
	}
}
