// Package archtest keeps the import rules written down in
// docs/architecture.md: which package may link which, and where a new
// package may live. It reads the import graph with `go list -deps`, so a rule
// broken by an indirect import fails as well as a direct one.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/emaildata/emaildata"

// The groups of internal/, by role. Rules name groups, not packages, so a
// package added to a group is covered the day it lands.
const (
	engine   = "internal/engine"   // verification engine: syntax, DNS, lists, SMTP, fleet, history
	lists    = "internal/lists"    // list pipeline and the list services
	refdata  = "internal/refdata"  // reference data: people, fraud, phone
	platform = "internal/platform" // helpers every binary uses: keys, logs, metrics
	wiring   = "internal/wiring"   // assembles the engine and services from configuration
	kits     = "internal/kits"     // test and development kits
	operator = "internal/operator"
	restapi  = "internal/restapi"
)

// crdTypes are the Kubernetes API types (api/ but its configuration
// type, configType).
var crdTypes = []string{"api/v1alpha1", "api/kubescheme"}

// configType is the configuration file's type (issue 32).
const configType = "api/config"

// groups are the only folders internal/ may hold (issue 24: at most 15).
var groups = []string{engine, lists, refdata, platform, wiring, kits, operator, restapi}

// kubeFree is the domain code: it never links Kubernetes, the API types or
// the controllers, so it runs the same in a Job pod, the API, `worker run`
// and a benchmark. listid is the one exception: it is the list-number
// counter, a ConfigMap on the API server, and has its own rule below.
var (
	kubeFree       = []string{engine, lists, refdata, platform, wiring}
	kubeFreeExcept = []string{"internal/lists/listid"}
)

// rule: no package under from (module-relative; a group covers its
// packages), other than those under except, may depend, directly or not,
// on a package matching any of deny (module-relative paths, or an external
// prefix ending in "/").
type rule struct {
	from, except, deny []string
	why                string
}

var rules = []rule{
	{[]string{restapi, "cmd/api"}, nil, []string{"controllers", operator},
		"the API binary must not link the manager"},
	{[]string{"controllers"}, nil, []string{restapi}, "controllers and restapi never import each other"},
	{[]string{"cmd/worker"}, nil, []string{"controllers", operator}, "the worker runs one list; it links no controller"},
	{[]string{wiring}, nil, append(crdTypes, "controllers"), "the wiring knows no CRD types"},
	{kubeFree, kubeFreeExcept,
		append(crdTypes, "k8s.io/", "sigs.k8s.io/", "controllers", operator, restapi),
		"domain code knows nothing of Kubernetes, the API types or the controllers"},
	// The configuration file's type is read by the wiring and the worker:
	// it links no Kubernetes library either.
	{[]string{configType}, nil, append(crdTypes, "k8s.io/", "sigs.k8s.io/", "controllers", operator, restapi),
		"the configuration type is plain Go, so that every binary and the wiring can read it"},
	{kubeFreeExcept, nil, []string{"api", "controllers", operator, restapi},
		"the list-number counter talks to the API server, but knows no CRD type or controller"},
	// The layers, lowest first: platform, engine, refdata, lists, wiring.
	{[]string{platform}, nil, []string{engine, refdata, lists, wiring},
		"platform helpers sit below every domain group"},
	{[]string{engine}, nil, []string{refdata, lists, wiring},
		"the engine checks addresses; it knows no list, reference data or wiring"},
	{[]string{refdata}, nil, []string{lists, wiring}, "reference data knows no list pipeline or wiring"},
	{[]string{lists}, nil, []string{wiring}, "the list pipeline is given its services; it does not assemble them"},
}

// graph is every package of the main module (hack/compare and hack/s3server
// are modules of their own) with its transitive non-test dependencies, keyed
// by module-relative path.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps", module+"/...")
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
	for _, want := range []string{"cmd/manager", "cmd/api", "cmd/worker", "internal/engine/verify"} {
		if _, ok := got[want]; !ok {
			t.Fatalf("go list did not report %s (%d packages)", want, len(got))
		}
	}
	return got
}

// under reports whether the module-relative package pkg is one of paths or
// below one.
func under(pkg string, paths []string) bool {
	for _, p := range paths {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

func denied(dep string, deny []string) bool {
	for _, d := range deny {
		if strings.HasSuffix(d, "/") && strings.HasPrefix(dep, d) {
			return true
		}
	}
	rel, ok := strings.CutPrefix(dep, module+"/")
	return ok && under(rel, deny)
}

// isKit: the kits group, and the test doubles kept beside the package they
// stand in for, Go's httptest convention (proxypool/socks5test,
// listservice/listservicetest, controllers/phasetest).
func isKit(pkg string) bool {
	return under(pkg, []string{kits}) || strings.HasSuffix(path.Base(pkg), "test")
}

func TestImportRules(t *testing.T) {
	g := graph(t)
	for _, r := range rules {
		matched := 0
		for from, ds := range g {
			if !under(from, r.from) || under(from, r.except) {
				continue
			}
			matched++
			for _, d := range ds {
				if denied(d, r.deny) {
					t.Errorf("%s depends on %s: %s", from, d, r.why)
				}
			}
		}
		if matched == 0 {
			t.Errorf("rule %q covers no package (from %v)", r.why, r.from)
		}
	}
}

// TestKitsOnlyInTestsAndHack: outside hack/ and the kits themselves, no
// package of the module links a kit (test files are not in go list's Deps),
// so no binary under cmd/ links one.
func TestKitsOnlyInTestsAndHack(t *testing.T) {
	g := graph(t)
	for from, ds := range g {
		if strings.HasPrefix(from, "hack/") || isKit(from) {
			continue
		}
		for _, d := range ds {
			if rel, ok := strings.CutPrefix(d, module+"/"); ok && isKit(rel) {
				what := "package"
				if strings.HasPrefix(from, "cmd/") {
					what = "binary"
				}
				t.Errorf("%s %s links the kit %s: kits are for tests and hack/ only", what, from, rel)
			}
		}
	}
}

// TestInternalFolders: internal/ holds the groups and nothing else, so a
// new package is placed by role (docs/architecture.md, "where to change
// what").
func TestInternalFolders(t *testing.T) {
	entries, err := os.ReadDir("../../../internal")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.IsDir() {
			got = append(got, "internal/"+e.Name())
		}
	}
	sort.Strings(got)
	for _, d := range got {
		if !under(d, groups) {
			t.Errorf("%s is not a group of internal/ (%v): put the package in the group of its role", d, groups)
		}
	}
	if len(got) > 15 {
		t.Errorf("internal/ holds %d folders, more than 15: %v", len(got), got)
	}
}

// TestMatchers checks the matchers the rules rely on.
func TestMatchers(t *testing.T) {
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
		{module + "/api/v1alpha1", []string{"api"}, true},
		{module + "/api/kubescheme", []string{"api"}, true},
		{module + "/internal/restapi", []string{"controllers"}, false},
		{module + "/internal/engine/smtpprobe", []string{engine}, true},
		{module + "/internal/engineroom", []string{engine}, false},
		{"example.com/internal/engine/x", []string{engine}, false},
	}
	for _, tt := range tests {
		if got := denied(tt.dep, tt.deny); got != tt.want {
			t.Errorf("denied(%q, %q) = %v, want %v", tt.dep, tt.deny, got, tt.want)
		}
	}
	kit := map[string]bool{
		"internal/kits/mailworld":                    true,
		"internal/kits/testkit/builders":             true,
		"internal/engine/proxypool/socks5test":       true,
		"internal/lists/listservice/listservicetest": true,
		"internal/engine/smtpprobe":                  false,
		"internal/kitsch":                            false,
	}
	for pkg, want := range kit {
		if got := isKit(pkg); got != want {
			t.Errorf("isKit(%q) = %v, want %v", pkg, got, want)
		}
	}
}
