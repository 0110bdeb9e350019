package argocdhealth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// ChecksDir holds the health checks the chart ships.
const checksDir = "../../../charts/emaildata/files/argocd"

func fixture(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	// Fixtures must be objects the API would hold: decode them strictly.
	var typed runtime.Object
	switch obj["kind"] {
	case "EmailList":
		typed = &listsv1.EmailList{}
	case "Purchase":
		typed = &listsv1.Purchase{}
	case "Dataset":
		typed = &listsv1.Dataset{}
	default:
		t.Fatalf("%s: kind %v", name, obj["kind"])
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, typed, true); err != nil {
		t.Fatalf("%s is not a valid %v: %v", name, obj["kind"], err)
	}
	return obj
}

// TestFixtures runs the checks on objects in states the integration tests
// do not reach (see controllers/argocd_health_test.go for those).
func TestFixtures(t *testing.T) {
	tests := []struct {
		file, status, message string
	}{
		{"emaillist-new.yaml", Progressing, "Waiting for the emaildata manager"},
		{"emaillist-stale.yaml", Progressing, "observe generation 2"},
		{"emaillist-start-failed.yaml", Progressing, "exceeded quota (0/1000)"},
		{"emaillist-callback-failed.yaml", Healthy, "callback failed: POST: 503"},
		{"purchase-new.yaml", Progressing, "Waiting for the emaildata manager"},
		{"dataset-loaded-skipped.yaml", Healthy, "loaded 98 of 100 rows (2 malformed rows skipped)"},
		{"dataset-stalled-no-phase.yaml", Degraded, "NamespaceNotAllowed: Datasets are honoured only"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			obj := fixture(t, tc.file)
			script, err := Load(checksDir, obj["kind"].(string))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Evaluate(script, obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.status || !strings.Contains(got.Message, tc.message) {
				t.Errorf("got %s %q, want %s and a message containing %q", got.Status, got.Message, tc.status, tc.message)
			}
		})
	}
}

// TestEvaluateRejects: a script returning no table or an unknown status is
// an error, as in Argo CD.
func TestEvaluateRejects(t *testing.T) {
	for _, script := range []string{`return nil`, `return {status = "Fine"}`, `error("boom")`, `return io.open("/etc/passwd")`} {
		if st, err := Evaluate(script, map[string]any{}); err == nil {
			t.Errorf("%q: got %+v, want an error", script, st)
		}
	}
}
