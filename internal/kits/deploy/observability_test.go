package deploy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/emaildata/emaildata/internal/platform/metrics"
)

const dashboardFile = "../../../charts/emaildata/files/dashboards/emaildata.json"

// grafanaVars are the Grafana variables the dashboard's queries use, with
// values that make them PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// labelsOf returns the label names a series of the metric name can carry.
func labelsOf(name string) []string {
	for _, f := range metrics.Families() {
		switch name {
		case f.Name, f.Name + "_sum", f.Name + "_count":
			return f.Labels
		case f.Name + "_bucket":
			return append(slices.Clone(f.Labels), "le")
		}
	}
	return nil
}

// checkQuery parses a PromQL query and checks that every metric it selects
// is one internal/platform/metrics registers, and that every label it matches or
// groups by is one of those metrics'. It returns the metrics selected.
func checkQuery(t *testing.T, where, query string) []string {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, query, err)
		return nil
	}
	var names []string
	labels := map[string]bool{"le": true}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		names = append(names, vs.Name)
		if vs.Name == "" || !metrics.Known(vs.Name) {
			t.Errorf("%s: %s is not a metric the code registers (query %q)", where, vs.Name, query)
			return nil
		}
		known := labelsOf(vs.Name)
		for _, l := range known {
			labels[l] = true
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel && !slices.Contains(known, m.Name) {
				t.Errorf("%s: %s has no label %q (query %q)", where, vs.Name, m.Name, query)
			}
		}
		return nil
	})
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if agg, ok := node.(*parser.AggregateExpr); ok {
			for _, g := range agg.Grouping {
				if !labels[g] {
					t.Errorf("%s: groups by %q, which none of %v carries (query %q)", where, g, names, query)
				}
			}
		}
		return nil
	})
	return names
}

// collectExprs returns the PromQL of every target of every panel, rows'
// nested panels included, keyed by panel title.
func collectExprs(t *testing.T, panels []any, out map[string][]string) {
	t.Helper()
	for _, p := range panels {
		panel := p.(map[string]any)
		title, _ := panel["title"].(string)
		if nested, ok := panel["panels"].([]any); ok {
			collectExprs(t, nested, out)
		}
		if panel["type"] == "row" {
			continue
		}
		targets, _ := panel["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no queries", title)
		}
		for _, tg := range targets {
			expr, _ := tg.(map[string]any)["expr"].(string)
			out[title] = append(out[title], expr)
		}
		if ds, _ := panel["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
			t.Errorf("panel %q does not use the dashboard's datasource variable: %v", title, panel["datasource"])
		}
	}
}

// TestDashboard: the dashboard is valid JSON, every query parses as PromQL
// and selects only registered metrics and their labels, and it covers
// lists, verdicts, DNS, SMTP and the API. The chart ships it unchanged.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash["uid"] == "" || dash["title"] == "" {
		t.Errorf("dashboard has no uid or title")
	}
	exprs := map[string][]string{}
	panels, _ := dash["panels"].([]any)
	collectExprs(t, panels, exprs)
	used := map[string]bool{}
	for title, qs := range exprs {
		for _, q := range qs {
			for _, n := range checkQuery(t, "panel "+title, grafanaVars.Replace(q)) {
				used[n] = true
			}
		}
	}
	for _, want := range []string{metrics.Lists, metrics.ListRowsProcessed, metrics.ListDuration + "_bucket", metrics.Verifications,
		metrics.CallbackDeliveries, metrics.APIRequests, metrics.APIRequestDuration + "_bucket",
		metrics.EngineCounterName("dns_lookups"), metrics.EngineCounterName("smtp_sessions"), metrics.EngineCounterName("smtp_stalled_hosts")} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}

	cm := find(t, renderChart(t, map[string]any{"dashboards": map[string]any{"enabled": true}}), "ConfigMap", "emaildata-dashboards")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v", cm.GetLabels())
	}
	shipped, _, _ := unstructuredString(cm.Object, "data", "emaildata.json")
	if shipped != strings.TrimSuffix(string(data), "\n") {
		t.Errorf("the chart's dashboard differs from %s", dashboardFile)
	}
}

// TestAlertRules: the chart's PrometheusRule has alerts for each concern
// of the issue, each with a severity and a summary, a valid for:, and
// PromQL over registered metrics only.
func TestAlertRules(t *testing.T) {
	rule := find(t, renderChart(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}}), "PrometheusRule", "emaildata-alerts")
	raw, err := json.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			checkQuery(t, "alert "+r.Alert, r.Expr)
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s lacks a severity or a summary", r.Alert)
			}
		}
	}
	for _, want := range []string{"EmailDataListsStuckProcessing", "EmailDataListsFailing", "EmailDataCallbacksFailing",
		"EmailDataSMTPHostsStalling", "EmailDataAPIErrors", "EmailDataAPILatency"} {
		if !alerts[want] {
			t.Errorf("no alert %s among %v", want, alerts)
		}
	}
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}
