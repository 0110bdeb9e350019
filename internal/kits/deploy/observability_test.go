package deploy

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/emaildata/emaildata/internal/platform/metrics"
)

const dashboardFile = "../../../charts/emaildata/files/dashboards/emaildata.json"

// grafanaVars are the Grafana variables the dashboard's queries use, with
// values that make them PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$namespace", ".+")

// targetLabels are the labels every scraped series carries besides its
// own: job and instance (Prometheus), namespace, service, pod, container
// and endpoint (the Prometheus Operator's ServiceMonitor).
var targetLabels = []string{"job", "instance", "namespace", "service", "pod", "container", "endpoint"}

// labelsOf returns the label names a series of the metric name can carry:
// its family's, and the scrape target's.
func labelsOf(name string) []string {
	for _, f := range append(metrics.Families(), metrics.ExternalFamilies()...) {
		switch name {
		case f.Name, f.Name + "_sum", f.Name + "_count":
			return slices.Concat(f.Labels, targetLabels)
		case f.Name + "_bucket":
			return slices.Concat(f.Labels, targetLabels, []string{"le"})
		}
	}
	return nil
}

// known reports whether a series name is one the code registers or one of
// the others' the alerts may read (metrics.ExternalFamilies).
func known(name string) bool {
	if metrics.Known(name) {
		return true
	}
	for _, f := range metrics.ExternalFamilies() {
		if f.Name == name {
			return true
		}
	}
	return false
}

// checkQuery parses a PromQL query and checks that every metric it selects
// is one internal/platform/metrics registers (or names as external), and
// that every label it matches or groups by is one of those metrics' or the
// scrape target's. It returns the selectors.
func checkQuery(t *testing.T, where, query string) []*parser.VectorSelector {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, query, err)
		return nil
	}
	var names []string
	var selectors []*parser.VectorSelector
	labels := map[string]bool{"le": true}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		names = append(names, vs.Name)
		selectors = append(selectors, vs)
		if vs.Name == "" || !known(vs.Name) {
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
	return selectors
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
			for _, vs := range checkQuery(t, "panel "+title, grafanaVars.Replace(q)) {
				used[vs.Name] = true
			}
			checkNamespaceFilter(t, title, q)
		}
	}
	checkNamespaceVariable(t, dash)
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

// checkNamespaceFilter: every selector of a dashboard query keeps only the
// namespaces the dashboard's namespace variable picks.
func checkNamespaceFilter(t *testing.T, title, query string) {
	t.Helper()
	const sentinel = "NAMESPACE_VARIABLE"
	q := grafanaVars.Replace(strings.ReplaceAll(query, "$namespace", sentinel))
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		return // checkQuery says so
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == "namespace" && m.Type == labels.MatchRegexp && m.Value == sentinel {
				return nil
			}
		}
		t.Errorf("panel %q: %s is not filtered by namespace=~\"$namespace\" (query %q)", title, vs.Name, query)
		return nil
	})
}

// checkNamespaceVariable: the dashboard has a namespace variable, several
// values and All allowed, listing the namespaces of emaildata's targets.
func checkNamespaceVariable(t *testing.T, dash map[string]any) {
	t.Helper()
	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	for _, v := range vars {
		m := v.(map[string]any)
		if m["name"] != "namespace" {
			continue
		}
		if m["type"] != "query" || m["multi"] != true || m["includeAll"] != true || m["allValue"] != ".+" {
			t.Errorf("namespace variable %v: want a query, multi, includeAll, allValue .+", m)
		}
		if ds, _ := m["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
			t.Errorf("namespace variable uses datasource %v", m["datasource"])
		}
		q, _ := m["query"].(map[string]any)
		query, _ := q["query"].(string)
		inner, ok := strings.CutPrefix(query, "label_values(")
		sel, label, ok2 := strings.Cut(strings.TrimSuffix(inner, ")"), ", ")
		if !ok || !ok2 || label != "namespace" || m["definition"] != query {
			t.Errorf("namespace variable query %q (definition %v): want label_values(<selector>, namespace)", query, m["definition"])
			return
		}
		for _, vs := range checkQuery(t, "namespace variable", sel) {
			if vs.Name != metrics.Up {
				t.Errorf("namespace variable selects %s, want up (every target, the API's too)", vs.Name)
			}
		}
		return
	}
	t.Errorf("the dashboard has no namespace variable")
}

// rule is one alerting rule of the chart's PrometheusRule.
type rule struct {
	Alert, Expr, For string
	Labels           map[string]string
	Annotations      map[string]string
}

// alertRules renders the PrometheusRule with vals (prometheusRule on) and
// returns its spec as YAML and its rules; the spec passes Prometheus's own
// rule file checks (rulefmt, as `promtool check rules` runs them: groups,
// PromQL, durations, label names, and the annotations' templates).
func alertRules(t *testing.T, vals map[string]any) []rule {
	t.Helper()
	if vals == nil {
		vals = map[string]any{}
	}
	vals["prometheusRule"] = map[string]any{"enabled": true}
	if u, ok := vals["runbookBaseURL"]; ok {
		vals["prometheusRule"].(map[string]any)["runbookBaseURL"] = u
		delete(vals, "runbookBaseURL")
	}
	obj := find(t, renderChart(t, vals), "PrometheusRule", "emaildata-alerts")
	raw, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := rulefmt.Parse(raw, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler)); len(errs) > 0 {
		t.Errorf("promtool-like check of the rules: %v", errs)
	}
	var spec struct{ Groups []struct{ Rules []rule } }
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, g := range spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// TestAlertRules: the chart's PrometheusRule passes Prometheus's rule
// checks, has alerts for each concern of the issues (lists, shards,
// callbacks, SMTP, DNS, the API, and the manager and API being down,
// reconcile errors, work queue depth), each with a severity, a summary and
// a runbook, over registered metrics (or the external ones named in
// metrics.ExternalFamilies) only; the manager's controller-runtime series
// are read from the manager's job alone.
func TestAlertRules(t *testing.T) {
	alerts := map[string]bool{}
	for _, r := range alertRules(t, nil) {
		alerts[r.Alert] = true
		for _, vs := range checkQuery(t, "alert "+r.Alert, r.Expr) {
			if metrics.Known(vs.Name) {
				continue
			}
			job := ""
			for _, m := range vs.LabelMatchers {
				if m.Name == "job" && m.Type == labels.MatchEqual {
					job = m.Value
				}
			}
			if job != "emaildata-manager" && job != "emaildata-api" {
				t.Errorf("alert %s reads %s of job %q, not emaildata's (the ServiceMonitors' job labels)", r.Alert, vs.Name, job)
			}
		}
		if r.For != "" {
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
		}
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["runbook_url"] == "" {
			t.Errorf("alert %s lacks a severity, a summary or a runbook_url", r.Alert)
		}
	}
	for _, want := range []string{"EmailDataListsStuckProcessing", "EmailDataListsFailing", "EmailDataCallbacksFailing",
		"EmailDataSMTPHostsStalling", "EmailDataAPIErrors", "EmailDataAPILatency",
		"EmailDataManagerDown", "EmailDataAPIDown", "EmailDataReconcileErrors", "EmailDataWorkQueueBacklog"} {
		if !alerts[want] {
			t.Errorf("no alert %s among %v", want, alerts)
		}
	}
}

const (
	operationsDoc  = "../../../docs/operations.md"
	runbookBaseURL = "https://github.com/emaildata/emaildata/blob/main/docs/operations.md"
)

// TestRunbookLinks is the docs' link check for the alerts: every alert's
// runbook_url is docs/operations.md (or prometheusRule.runbookBaseURL)
// with the anchor of a heading of that page, its own section named after
// it; and every #anchor link inside the page, and every link of the README
// into it, resolves too.
func TestRunbookLinks(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := MarkdownAnchors(string(doc))
	for _, tc := range []struct{ vals map[string]any }{
		{nil},
		{map[string]any{"runbookBaseURL": "https://wiki.example/ops/emaildata.md/"}},
	} {
		base := runbookBaseURL
		if u, ok := tc.vals["runbookBaseURL"]; ok {
			base = strings.TrimSuffix(u.(string), "/")
		}
		rules := alertRules(t, tc.vals)
		if len(rules) < 12 {
			t.Errorf("%d alerts, want the 12 with runbooks at least", len(rules))
		}
		sections := map[string]string{}
		for _, r := range rules {
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], base+"#")
			switch {
			case !ok:
				t.Errorf("alert %s: runbook_url %q is not %s#<section>", r.Alert, r.Annotations["runbook_url"], base)
			case !anchors[anchor]:
				t.Errorf("alert %s: runbook_url's #%s is no heading of %s", r.Alert, anchor, operationsDoc)
			case anchor != Slug(r.Alert):
				t.Errorf("alert %s: runbook_url points at #%s, not its own section #%s", r.Alert, anchor, Slug(r.Alert))
			case sections[anchor] != "":
				t.Errorf("alerts %s and %s share the runbook #%s", sections[anchor], r.Alert, anchor)
			}
			sections[anchor] = r.Alert
		}
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(doc), -1) {
		if !anchors[m[1]] {
			t.Errorf("%s links to #%s, which none of its headings is", operationsDoc, m[1])
		}
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`docs/operations\.md#([^)\s]+)`).FindAllStringSubmatch(string(readme), -1) {
		if !anchors[m[1]] {
			t.Errorf("README.md links to docs/operations.md#%s, which none of its headings is", m[1])
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
