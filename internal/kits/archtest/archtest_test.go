// Package archtest keeps the import rules of the developers' guide: which
// package may link which. It reads the import graph with `go list -deps`, so
// a rule broken by an indirect import fails as well as a direct one.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/emaildata/emaildata"

// engines are the domain engines: they never link Kubernetes, the API
// types or the controllers.
var engines = []string{
	"internal/engine/verify", "internal/lists/listfile", "internal/engine/smtpprobe", "internal/engine/mxdns",
	"internal/refdata/people", "internal/refdata/fraud", "internal/lists/pipeline", "internal/lists/blobstore",
	"internal/platform/apikey", "internal/platform/services", "internal/lists/listservice", "internal/refdata/phone",
	"internal/engine/fleet", "internal/engine/evhistory",
}

// kits are test and development kits: only tests and hack/ import them,
// so no binary links one. (Issue 24's regrouping of internal/ adds the
// older kits here.)
var kits = []string{"internal/kits/testkit"}

// rule: no package in from (module-relative) may depend, directly or not,
// on a package matching any of deny (module-relative paths, or an external
// prefix ending in "/").
type rule struct {
	from []string
	deny []string
	why  string
}

var rules = []rule{
	{[]string{"internal/restapi", "cmd/api"}, []string{"controllers", "internal/operator"},
		"the API binary must not link the manager"},
	{[]string{"controllers"}, []string{"internal/restapi"}, "controllers and restapi never import each other"},
	{[]string{"cmd/worker"}, []string{"controllers", "internal/operator"}, "the worker runs one list; it links no controller"},
	{[]string{"internal/wiring"}, []string{"api/v1alpha1", "controllers"}, "the service catalog knows no CRD types"},
	{engines, []string{"k8s.io/", "sigs.k8s.io/", "api/v1alpha1", "controllers", "internal/operator", "internal/restapi"},
		"domain engines know nothing of Kubernetes, the API types or the controllers"},
}

// deps returns each listed package's transitive (non-test) dependencies.
func deps(t *testing.T, pkgs []string) map[string][]string {
	t.Helper()
	args := []string{"list", "-deps=false", "-json=ImportPath,Deps"}
	for _, p := range pkgs {
		args = append(args, module+"/"+p)
	}
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	got := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		got[strings.TrimPrefix(p.ImportPath, module+"/")] = p.Deps
	}
	return got
}

func denied(dep string, deny []string) bool {
	for _, d := range deny {
		if strings.HasSuffix(d, "/") && strings.HasPrefix(dep, d) {
			return true
		}
		if dep == module+"/"+d || strings.HasPrefix(dep, module+"/"+d+"/") {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	var all []string
	for _, r := range rules {
		all = append(all, r.from...)
	}
	graph := deps(t, all)
	for _, r := range rules {
		for _, from := range r.from {
			ds, ok := graph[from]
			if !ok {
				t.Errorf("go list did not report %s", from)
				continue
			}
			for _, d := range ds {
				if denied(d, r.deny) {
					t.Errorf("%s depends on %s: %s", from, d, r.why)
				}
			}
		}
	}
}

// TestKitsOnlyInTestsAndHack: no package of the module outside hack/ and
// the kits themselves links a kit (test files are not in go list's Deps).
func TestKitsOnlyInTestsAndHack(t *testing.T) {
	graph := deps(t, []string{"..."})
	if len(graph) < 10 {
		t.Fatalf("go list reported %d packages", len(graph))
	}
	for from, ds := range graph {
		if strings.HasPrefix(from, "hack/") || denied(module+"/"+from, kits) {
			continue
		}
		for _, d := range ds {
			if denied(d, kits) {
				t.Errorf("%s depends on the test kit %s: kits are for tests and hack/ only", from, d)
			}
		}
	}
}

// TestDenied checks the matcher the rules rely on.
func TestDenied(t *testing.T) {
	tests := []struct {
		dep  string
		deny []string
		want bool
	}{
		{"k8s.io/api/core/v1", []string{"k8s.io/"}, true},
		{"sigs.k8s.io/yaml", []string{"k8s.io/"}, false},
		{module + "/controllers", []string{"controllers"}, true},
		{module + "/controllers/sub", []string{"controllers"}, true},
		{module + "/controllersx", []string{"controllers"}, false},
		{module + "/api/v1alpha1", []string{"api/v1alpha1"}, true},
		{module + "/internal/restapi", []string{"controllers"}, false},
	}
	for _, tt := range tests {
		if got := denied(tt.dep, tt.deny); got != tt.want {
			t.Errorf("denied(%q, %q) = %v, want %v", tt.dep, tt.deny, got, tt.want)
		}
	}
}
