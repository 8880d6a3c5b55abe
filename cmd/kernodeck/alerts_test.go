package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

const rulesFile = "../../deploy/monitoring/kernodeck.rules.yml"

// alertRules reads the alert names and expressions of the committed rules.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// sample is one scraped series, as promtool's series notation and value.
type sample struct {
	series string
	value  float64
}

// kernodeckSamples flattens the kernodeck_* families of a scrape into
// series (histograms into _bucket, _sum and _count), the way Prometheus
// would store them.
func kernodeckSamples(fams map[string]*dto.MetricFamily) []sample {
	var out []sample
	sel := func(name string, labels []*dto.LabelPair, extra ...string) string {
		var parts []string
		for _, l := range labels {
			parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		parts = append(parts, extra...)
		parts = append(parts, `instance="under-test"`, `job="kernodeck-dev"`)
		return name + "{" + strings.Join(parts, ",") + "}"
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "kernodeck_") {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.Gauge != nil:
				out = append(out, sample{sel(name, m.GetLabel()), m.GetGauge().GetValue()})
			case m.Counter != nil:
				out = append(out, sample{sel(name, m.GetLabel()), m.GetCounter().GetValue()})
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					out = append(out, sample{sel(name+"_bucket", m.GetLabel(), `le="`+le+`"`), float64(b.GetCumulativeCount())})
				}
				out = append(out, sample{sel(name+"_bucket", m.GetLabel(), `le="+Inf"`), float64(h.GetSampleCount())},
					sample{sel(name+"_sum", m.GetLabel()), h.GetSampleSum()},
					sample{sel(name+"_count", m.GetLabel()), float64(h.GetSampleCount())})
			}
		}
	}
	out = append(out, sample{`up{instance="under-test",job="kernodeck-dev"}`, 1})
	return out
}

// expSample is what one alert expression must return.
type expSample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

// evalRules writes a promtool unit test whose input is the scrape held
// constant for 20 minutes, and whose expectations are, per alert, the
// samples its expression must return at 15 minutes (none: quiet), and runs it.
func evalRules(t *testing.T, fams map[string]*dto.MetricFamily, want map[string][]expSample) {
	t.Helper()
	rules := alertRules(t)
	abs, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var series []map[string]string
	for _, s := range kernodeckSamples(fams) {
		series = append(series, map[string]string{"series": s.series,
			"values": strconv.FormatFloat(s.value, 'g', -1, 64) + "x20"})
	}
	var exprTests []map[string]any
	for name, expr := range rules {
		exp := want[name]
		if exp == nil {
			exp = []expSample{}
		}
		exprTests = append(exprTests, map[string]any{"expr": expr, "eval_time": "15m", "exp_samples": exp})
	}
	doc := map[string]any{
		"rule_files":          []string{abs},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval": "1m", "input_series": series, "promql_expr_test": exprTests,
		}},
	}
	raw, _ := json.MarshalIndent(doc, "", " ") // YAML is a superset of JSON
	file := filepath.Join(t.TempDir(), "scrape.test.yml")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool: %v (scripts/tools.d/30-promtool.sh installs it)", err)
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules on the scrape: %v\n%s", err, out)
	}
}

var familyRef = regexp.MustCompile(`\bkernodeck_[a-z_]+`)

// ruleFamilies are the kernodeck_* names the alert expressions read.
func ruleFamilies(t *testing.T) []string {
	var out []string
	for _, expr := range alertRules(t) {
		for _, name := range familyRef.FindAllString(expr, -1) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

var dashboardRef = regexp.MustCompile(`\b(?:kernodeck|temporal|process)_[a-z_]+`)

// dashboardFamilies are the family names the Grafana dashboard queries
// (histogram series named by their family).
func dashboardFamilies(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range dashboardRef.FindAllString(string(raw), -1) {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			name = strings.TrimSuffix(name, suffix)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
