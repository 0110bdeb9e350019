package deploy

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// renderNotes renders the chart's NOTES.txt with vals.
func renderNotes(t *testing.T, vals map[string]any) string {
	t.Helper()
	files, err := renderFiles(vals)
	if err != nil {
		t.Fatal(err)
	}
	notes, ok := files["emaildata/templates/NOTES.txt"]
	if !ok {
		t.Fatal("no NOTES.txt rendered")
	}
	return notes
}

// notesExample returns the objects of the NOTES' inline first list (the
// heredoc between <<'EOF' and EOF), unindented and decoded.
func notesExample(t *testing.T, notes string) []*unstructured.Unstructured {
	t.Helper()
	m := regexp.MustCompile(`(?s)<<'EOF'\n(.*?)\n\s*EOF\n`).FindStringSubmatch(notes)
	if m == nil {
		t.Fatalf("NOTES.txt has no inline list:\n%s", notes)
	}
	var b strings.Builder
	for _, line := range strings.Split(m[1], "\n") {
		b.WriteString(strings.TrimPrefix(line, "  ") + "\n")
	}
	objs, err := decodeDocs([]byte(b.String()))
	if err != nil {
		t.Fatalf("the NOTES' inline list: %v", err)
	}
	return objs
}

// TestChartNotes: NOTES.txt tells an installer from a chart repository
// what to do next, with commands that work as they are: the Pod Security
// label; an API key Secret whose label and data keys are the ones
// internal/platform/apikey reads (the Secret it makes is read back by
// apikey's store); the port-forward to the API's Service and port; a first
// list given inline (no path into the source repository), a ConfigMap and
// an EmailList that decode strictly (TestServerSideDryRun has the API
// server validate them); where the metrics, dashboard and alerts are, and
// the warning when the ServiceMonitor cannot verify the manager.
func TestChartNotes(t *testing.T) {
	notes := renderNotes(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "dashboards": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true}, "metrics": map[string]any{"prometheusServiceAccount": map[string]any{"name": "prom", "namespace": "monitoring"}}})
	for _, want := range []string{
		"kubectl label ns emaildata-system pod-security.kubernetes.io/enforce=restricted",
		"kubectl -n emaildata-system-emaildata-keys label secret acme-api-key " + apikey.Label + "=true",
		"kubectl -n emaildata-system port-forward svc/emaildata-api 8090:80",
		"ClusterRole emaildata-metrics-reader (bound to monitoring/prom)",
		"ConfigMap emaildata-dashboards in emaildata-system (grafana_dashboard=1)",
		"PrometheusRule emaildata-alerts",
		"docs/operations.md",
		"WARNING: Prometheus verifies the manager's certificate",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "config/samples") {
		t.Errorf("NOTES.txt points into the source repository:\n%s", notes)
	}
	for _, s := range services.Known {
		if !strings.Contains(notes, s) {
			t.Errorf("NOTES.txt does not name the service %s a key may enable", s)
		}
	}
	checkNotesKey(t, notes)

	objs := notesExample(t, notes)
	if len(objs) != 2 || objs[0].GetKind() != "ConfigMap" || objs[1].GetKind() != "EmailList" {
		t.Fatalf("inline example %v, want a ConfigMap and an EmailList", objs)
	}
	var list listsv1.EmailList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[1].Object, &list, true); err != nil {
		t.Fatalf("the example EmailList: %v", err)
	}
	ref := list.Spec.Source.ConfigMapKeyRef
	if ref == nil || ref.Name != objs[0].GetName() {
		t.Fatalf("the example list reads %+v, not its ConfigMap %s", ref, objs[0].GetName())
	}
	if data, _, _ := unstructured.NestedString(objs[0].Object, "data", ref.Key); !strings.HasPrefix(data, "email\n") || strings.Count(data, "@") != 2 {
		t.Errorf("the example ConfigMap's %s is %q", ref.Key, data)
	}

	if strings.Contains(notes, "create secret generic emaildata-callback-signing") {
		t.Errorf("NOTES.txt asks for the callback signing key, which the manager makes:\n%s", notes)
	}
	apart := renderNotes(t, map[string]any{"apiKeys": map[string]any{"namespace": "emaildata-keys"}})
	if !strings.Contains(apart, "kubectl -n emaildata-keys label secret acme-api-key") {
		t.Errorf("with apiKeys.namespace, NOTES.txt still puts the key elsewhere:\n%s", apart)
	}
	// The opt-out says what it grants; the default says where keys go.
	shared := renderNotes(t, map[string]any{"apiKeys": map[string]any{"namespace": releaseNS}})
	for notes, want := range map[string]string{shared: "WARNING: keys are in the release namespace",
		renderNotes(t, nil): "emaildata-system-emaildata-keys holds key Secrets only"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}

	quiet := renderNotes(t, map[string]any{"api": map[string]any{"enabled": false}, "metrics": map[string]any{"certSecret": "tls"},
		"serviceMonitor": map[string]any{"enabled": true}})
	if strings.Contains(quiet, "port-forward") || strings.Contains(quiet, "WARNING") || !strings.Contains(quiet, "2. A first list") {
		t.Errorf("without the API and with a metrics certificate, NOTES.txt says:\n%s", quiet)
	}
}

// checkNotesKey runs the NOTES' `kubectl create secret` as apikey would
// see the Secret: the key it makes is found, for its tenant and service.
func checkNotesKey(t *testing.T, notes string) {
	t.Helper()
	m := regexp.MustCompile(`create secret generic (\S+) \\\n((?:.*\n){1,3}?)  kubectl`).FindStringSubmatch(notes)
	if m == nil {
		t.Fatalf("no kubectl create secret in NOTES.txt:\n%s", notes)
	}
	data := map[string][]byte{}
	for _, lit := range regexp.MustCompile(`--from-literal=(\w+)=("[^"]*"|\S+)`).FindAllStringSubmatch(m[2], -1) {
		data[lit[1]] = []byte(strings.ReplaceAll(strings.Trim(lit[2], `"`), "$KEY", "0123456789abcdef0123456789abcdef"))
	}
	store := apikey.NewStore()
	if err := store.Upsert(apikey.Source{Namespace: releaseNS, Name: m[1]}, data); err != nil {
		t.Fatalf("the NOTES' key Secret %v: %v", data, err)
	}
	k, ok := store.Lookup("0123456789abcdef0123456789abcdef")
	if !ok || k.Tenant != "acme" || !k.Enabled(services.EmailValidation) {
		t.Errorf("the NOTES' key resolves to %+v (%v), want tenant acme with email_validation", k, ok)
	}
}
