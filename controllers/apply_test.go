package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

// Manifests applied as YAML, the way kubectl and Argo CD send them:
// client-side apply (kubectl apply, Argo CD's default) and server-side
// apply (kubectl apply --server-side, Argo CD's ServerSideApply=true). For
// every boolean and optional field, what the user applied must be what the
// API server keeps after the controller added its finalizer and moved the
// object on, and a second apply (a sync) must change nothing.

var applyModes = []struct {
	name string
	args []string
}{
	{"client-side", []string{"apply", "-f", "-"}},
	{"server-side", []string{"apply", "--server-side", "--field-manager=argocd-controller", "-f", "-"}},
}

func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		bin = filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s\nmanifest:\n%s", strings.Join(args, " "), err, out, stdin)
	}
	return string(out)
}

// appliedSpec is the spec of a YAML manifest, as JSON values.
func appliedSpec(t *testing.T, manifest string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	return obj["spec"].(map[string]any)
}

// storedSpec reads the object's spec from the API server, untyped, so no
// Go type can hide a dropped field.
func storedSpec(t *testing.T, kind, ns, name string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "lists.emaildata.io", Version: "v1alpha1", Kind: kind})
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	spec, _ := u.Object["spec"].(map[string]any)
	return spec
}

func sameSpec(t *testing.T, kind, ns, name, manifest string) {
	t.Helper()
	// JSON renders numbers alike whatever their Go type, and sorts keys.
	w, _ := json.Marshal(appliedSpec(t, manifest))
	g, _ := json.Marshal(storedSpec(t, kind, ns, name))
	if string(w) != string(g) {
		t.Errorf("%s %s: stored spec %s, applied %s", kind, name, g, w)
	}
}

func TestApplyEmailListFields(t *testing.T) {
	cases := []struct {
		name, format, extra, data string
		phase                     listsv1.Phase
		want                      string // a result row
	}{
		{"header false", "header: false, delimiter: pipe, emailColumn: 2", "", "x|a@x.example\n", listsv1.PhaseResults, "x|a@x.example|"},
		{"header true", "header: true, delimiter: pipe, emailColumn: 2", "", "name|email\nx|a@x.example\n", listsv1.PhaseResults, "x|a@x.example|"},
		{"header omitted", "delimiter: comma", "", "a@x.example\n", listsv1.PhaseResults, "a@x.example,"},
		{"delimiter and column omitted", "header: false", "", "a@x.example\tz\n", listsv1.PhaseResults, "a@x.example\tz\t"},
		{"action report", "header: false, delimiter: comma", "  action: report\n  service: email_intelligence\n", "a@x.example\n", listsv1.PhaseProcessed, ""},
		{"action process", "header: false, delimiter: comma", "  action: process\n", "a@x.example\n", listsv1.PhaseResults, "a@x.example,"},
		{"callbackURL", "header: false, delimiter: comma", "  callbackURL: http://127.0.0.1:9/hook\n", "a@x.example\n", listsv1.PhaseResults, "a@x.example,"},
	}
	for _, mode := range applyModes {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				name := uniqueName("apply")
				createConfigMap(t, nsLocal, name, "list.csv", tc.data)
				service := "  service: email_validation\n"
				if strings.Contains(tc.extra, "service:") {
					service = ""
				}
				manifest := fmt.Sprintf(`apiVersion: lists.emaildata.io/v1alpha1
kind: EmailList
metadata:
  name: %s
  namespace: %s
spec:
%s%s  source:
    configMapKeyRef: {name: %s, key: list.csv}
  format: {name: people.csv, %s}
`, name, nsLocal, service, tc.extra, name, tc.format)
				kubectl(t, manifest, mode.args...)
				l := waitPhase(t, nsLocal, name, tc.phase)
				if len(l.Finalizers) == 0 || l.Status.ListID == 0 || condition(l.Status.Conditions, listsv1.ConditionReady) == nil {
					t.Errorf("finalizers %v, list ID %d, conditions %s", l.Finalizers, l.Status.ListID, fmtConds(l.Status.Conditions))
				}
				if tc.want != "" && !strings.Contains(string(readResult(t, l)), tc.want) {
					t.Errorf("result %q lacks %q", readResult(t, l), tc.want)
				}
				sameSpec(t, "EmailList", nsLocal, name, manifest)
				if out := kubectl(t, manifest, mode.args...); !strings.Contains(out, "unchanged") && !strings.Contains(out, "serverside-applied") {
					t.Errorf("second apply: %s", out)
				}
				sameSpec(t, "EmailList", nsLocal, name, manifest)
			})
		}
	}
}

func TestApplyPurchaseFields(t *testing.T) {
	cases := []struct{ name, spec, want string }{
		{"no options", "", "email,domain\na@x.com,x.com\n"},
		{"fields", "  fields: [domain]\n", "email,domain\na@x.com,x.com\n"},
		{"empty fields", "  fields: []\n", "email,domain\na@x.com,x.com\n"},
		{"matchType H", "  matchType: H\n", "email,domain\na@x.com,x.com\n"},
	}
	for _, mode := range applyModes {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				name := uniqueName("apply-buy")
				createConfigMap(t, nsLocal, name, "list.csv", "a@x.com\n")
				create(t, builders.MakeEmailList(nsLocal, name).Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).ConfigMap(name, "list.csv").Obj())
				waitPhase(t, nsLocal, name, listsv1.PhaseProcessed)
				manifest := fmt.Sprintf(`apiVersion: lists.emaildata.io/v1alpha1
kind: Purchase
metadata:
  name: %s
  namespace: %s
spec:
  listName: %s
%s`, name, nsLocal, name, tc.spec)
				kubectl(t, manifest, mode.args...)
				waitPurchase(t, nsLocal, name, listsv1.PurchasePurchased, "is purchased")
				l := waitPhase(t, nsLocal, name, listsv1.PhaseResults)
				if got := string(readResult(t, l)); got != tc.want {
					t.Errorf("delivered %q, want %q", got, tc.want)
				}
				sameSpec(t, "Purchase", nsLocal, name, manifest)
				kubectl(t, manifest, mode.args...)
				sameSpec(t, "Purchase", nsLocal, name, manifest)
			})
		}
	}
}

func TestApplyDatasetFields(t *testing.T) {
	cases := []struct {
		name, spec string
		bad        bool
		phase      listsv1.DatasetPhase
	}{
		{"continueOnError false", "  continueOnError: false\n", true, listsv1.DatasetFailed},
		{"continueOnError omitted", "", true, listsv1.DatasetFailed},
		{"continueOnError true", "  continueOnError: true\n", true, listsv1.DatasetLoaded},
		{"maxErrors", "  continueOnError: true\n  maxErrors: 5\n", true, listsv1.DatasetLoaded},
		{"good file, false", "  continueOnError: false\n", false, listsv1.DatasetLoaded},
	}
	for _, mode := range applyModes {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				name := uniqueName("apply-ds")
				data, _ := peopleCSV(name, tc.bad)
				createConfigMap(t, nsLocal, name, "people.csv", data)
				manifest := fmt.Sprintf(`apiVersion: lists.emaildata.io/v1alpha1
kind: Dataset
metadata:
  name: %s
  namespace: %s
spec:
  source:
    configMapKeyRef: {name: %s, key: people.csv}
%s`, name, nsLocal, name, tc.spec)
				kubectl(t, manifest, mode.args...)
				ds := waitDataset(t, nsLocal, name, tc.phase)
				if len(ds.Finalizers) == 0 || condition(ds.Status.Conditions, listsv1.ConditionReady) == nil {
					t.Errorf("finalizers %v, conditions %s", ds.Finalizers, fmtConds(ds.Status.Conditions))
				}
				if tc.phase == listsv1.DatasetFailed && !strings.Contains(fmtConds(ds.Status.Conditions), "line 4") {
					t.Errorf("failure does not name the line: %s", fmtConds(ds.Status.Conditions))
				}
				sameSpec(t, "Dataset", nsLocal, name, manifest)
				kubectl(t, manifest, mode.args...)
				sameSpec(t, "Dataset", nsLocal, name, manifest)
			})
		}
	}
}
