package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// rbacSetup is one rendering of the chart and where its calls are made.
type rbacSetup struct {
	name, release, ns string
	vals              map[string]any
	// watched are the namespaces the manager reconciles (nil: every one);
	// listed those of them named in watchNamespaces.
	watched, listed []string
	keyNS           string
}

var rbacSetups = []rbacSetup{
	{name: "cluster-wide (defaults)", release: releaseName, ns: releaseNS, keyNS: releaseNS + "-" + releaseName + "-keys"},
	// The opt-out: keys in the release namespace, where the API may then
	// list and watch every Secret.
	{name: "cluster-wide, keys in the release namespace", release: "shared", ns: "shared-system",
		vals: map[string]any{"apiKeys": map[string]any{"namespace": "shared-system"}}, keyNS: "shared-system"},
	{name: "namespaced, keys apart", release: "mail", ns: "mail-system",
		vals:    map[string]any{"watchNamespaces": []any{"team-a"}, "apiKeys": map[string]any{"namespace": "mail-keys"}},
		watched: []string{"team-a", "mail-system"}, listed: []string{"team-a"}, keyNS: "mail-keys"},
}

// release is what a rendered release's RBAC is about: its accounts and
// the names of the objects its calls name.
type release struct {
	rbacSetup
	objs    []*unstructured.Unstructured
	users   map[controllers.Account]string
	objects map[string]string // controllers.Object* or installsecret.Kind → name
}

// readRelease finds the accounts and object names in a rendering: the
// names come from the manager's flags, which the API's must repeat.
func readRelease(t *testing.T, s rbacSetup, objs []*unstructured.Unstructured) release {
	t.Helper()
	r := release{rbacSetup: s, objs: objs, users: map[controllers.Account]string{}, objects: map[string]string{}}
	var mgrArgs, apiArgs []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		user := serviceAccountUser(s.ns, d.Spec.Template.Spec.ServiceAccountName)
		switch d.Spec.Template.Labels["app.kubernetes.io/component"] {
		case "manager":
			r.users[controllers.AccountManager], mgrArgs = user, d.Spec.Template.Spec.Containers[0].Args
		case "api":
			r.users[controllers.AccountAPI], apiArgs = user, d.Spec.Template.Spec.Containers[0].Args
		}
	}
	// The names are the configuration's, which both Deployments mount;
	// neither overrides one with a flag.
	conf := renderedConfig(t, objs)
	r.objects[controllers.ObjectLease] = conf.Manager.LeaderElectionID
	r.objects[controllers.ObjectListIDCounter] = conf.Installation.ListIDConfigMap
	for _, spec := range installsecret.Specs() {
		v := conf.Installation.Secrets[string(spec.Kind)]
		if v == "" {
			t.Fatalf("%s: the configuration names no %s Secret", s.name, spec.Kind)
		}
		r.objects[string(spec.Kind)] = v
	}
	for _, args := range [][]string{mgrArgs, apiArgs} {
		for _, flag := range []string{"--leader-election-id", "--list-id-configmap", "--" + installsecret.Specs()[0].Flag()} {
			if _, ok := argValue(args, flag); ok {
				t.Errorf("%s: %s overrides the configuration", s.name, flag)
			}
		}
	}
	return r
}

// namespacesOf are the namespaces where calls of scope sc are checked
// ("" is cluster-wide: a cluster-wide cache lists and watches there).
func (r release) namespacesOf(sc controllers.Scope) []string {
	switch sc {
	case controllers.ScopeWatched:
		if r.watched == nil {
			return []string{"", "team-a", "team-b", r.ns}
		}
		return r.watched
	case controllers.ScopeListNamespaces:
		if r.watched == nil {
			return []string{"", "team-a", "team-b", r.ns}
		}
		return r.listed
	case controllers.ScopeOperator:
		return []string{r.ns}
	case controllers.ScopeAPIKeys:
		return []string{r.keyNS}
	}
	return []string{""}
}

// TestRBACMatchesAPICalls applies the RBAC the chart renders to a real API
// server and checks it against controllers.APICalls, the calls the manager
// and the API make, both ways: every call is allowed where the code makes
// it (a SubjectAccessReview each), and every rule bound to the two accounts
// is one a call needs (no grant beyond the list). Then it asks `kubectl
// auth can-i` what the issue asked: the manager creates no Job or pod
// outside its namespace and lists or watches no Secret anywhere; the API
// reads no Secret but the ones it needs.
func TestRBACMatchesAPICalls(t *testing.T) {
	t.Parallel() // a control plane of its own
	tc := startCluster(t)
	tc.namespaces(t, "emaildata-system", "mail-system", "mail-keys", "shared-system", "team-a", "team-b")
	installCRDs(context.Background(), t, tc.cfg, tc.c, renderChart(t, nil))
	for _, s := range rbacSetups {
		t.Run(s.name, func(t *testing.T) {
			objs := renderRelease(t, s.release, s.ns, s.vals)
			r := readRelease(t, s, objs)
			var rbac []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "Namespace" { // the key namespace, before its Role
					rbac = append([]*unstructured.Unstructured{o}, rbac...)
				} else if strings.HasPrefix(o.GetAPIVersion(), "rbac.authorization.k8s.io/") || o.GetKind() == "ServiceAccount" {
					rbac = append(rbac, o)
				}
			}
			tc.apply(t, rbac)
			t.Run("every call allowed", func(t *testing.T) { checkCallsAllowed(t, tc, r) })
			t.Run("every rule needed", func(t *testing.T) { checkRulesNeeded(t, r) })
			t.Run("refusals", func(t *testing.T) { checkRefusals(t, tc, r) })
		})
	}
}

func checkCallsAllowed(t *testing.T, tc *testCluster, r release) {
	n := 0
	for _, c := range controllers.APICalls() {
		for _, ns := range r.namespacesOf(c.Scope) {
			a := access{user: r.users[c.Account], verb: c.Verb, group: c.Group, resource: c.Resource, namespace: ns}
			if c.Object != "" && c.Verb != "create" {
				a.name = r.objects[c.Object]
			}
			if !tc.allowed(t, a) {
				t.Errorf("refused: %s, which %s needs", a, c.By)
			}
			n++
		}
	}
	if n < 60 {
		t.Fatalf("only %d accesses checked", n)
	}
}

// checkRulesNeeded: each (verb, resource, name) a rule bound to the
// manager or the API grants, where it grants it, is a call's.
func checkRulesNeeded(t *testing.T, r release) {
	roles := map[string][]rbacv1.PolicyRule{}
	var bindings []*unstructured.Unstructured
	for _, o := range r.objs {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			var role rbacv1.ClusterRole // the same rules field
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = role.Rules
		case "RoleBinding", "ClusterRoleBinding":
			bindings = append(bindings, o)
		}
	}
	checked := 0
	for _, b := range bindings {
		var rb rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &rb); err != nil {
			t.Fatal(err)
		}
		ns := ""
		if rb.RoleRef.Kind == "Role" {
			ns = b.GetNamespace()
		}
		rules, ok := roles[rb.RoleRef.Kind+"/"+ns+"/"+rb.RoleRef.Name]
		if !ok {
			t.Errorf("%s %s binds %s %s, not rendered", b.GetKind(), b.GetName(), rb.RoleRef.Kind, rb.RoleRef.Name)
			continue
		}
		for _, subj := range rb.Subjects {
			acc, ok := accountOf(r, serviceAccountUser(subj.Namespace, subj.Name))
			if !ok {
				continue
			}
			for _, g := range grants(rules) {
				checked++
				if !r.needed(acc, b.GetKind(), b.GetNamespace(), g) {
					t.Errorf("%s %s gives the %s %s, which no call in controllers.APICalls needs there", b.GetKind(), b.GetName(), acc, g)
				}
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d grants checked", checked)
	}
}

func accountOf(r release, user string) (controllers.Account, bool) {
	for acc, u := range r.users {
		if u == user {
			return acc, true
		}
	}
	return "", false
}

// grant is one verb on one resource, maybe one name, that a rule gives.
type grant struct{ group, resource, verb, name string }

func (g grant) String() string {
	s := g.verb + " " + g.resource
	if g.name != "" {
		s += "/" + g.name
	}
	return s
}

func grants(rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, rule := range rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, gr := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					for _, n := range names {
						out = append(out, grant{gr, res, v, n})
					}
				}
			}
		}
	}
	return out
}

// needed reports whether a call of acc needs g as bound by a binding of
// kind in namespace ns.
func (r release) needed(acc controllers.Account, kind, ns string, g grant) bool {
	return slices.ContainsFunc(controllers.APICalls(), func(c controllers.APICall) bool {
		if c.Account != acc || c.Group != g.group || c.Resource != g.resource || c.Verb != g.verb {
			return false
		}
		switch {
		case g.name != "" && (c.Object == "" || r.objects[c.Object] != g.name):
			return false
		case g.name == "" && c.Object != "" && c.Verb != "create":
			return false // a grant on every name for a call on one
		}
		if kind == "ClusterRoleBinding" {
			return c.Scope == controllers.ScopeCluster ||
				(c.Scope == controllers.ScopeWatched || c.Scope == controllers.ScopeListNamespaces) && r.watched == nil
		}
		switch c.Scope {
		case controllers.ScopeOperator:
			return ns == r.ns
		case controllers.ScopeAPIKeys:
			return ns == r.keyNS
		case controllers.ScopeWatched:
			return r.watched == nil || slices.Contains(r.watched, ns)
		case controllers.ScopeListNamespaces:
			return r.watched == nil || slices.Contains(r.listed, ns)
		}
		return false
	})
}

// checkRefusals asks kubectl what must be refused, and what the chart's
// defaults still allow (RBAC cannot narrow a watch to a label).
func checkRefusals(t *testing.T, tc *testCluster, r release) {
	mgr, api := r.users[controllers.AccountManager], r.users[controllers.AccountAPI]
	helmRecord := fmt.Sprintf("sh.helm.release.v1.%s.v1", r.release)
	refused := []access{
		{user: mgr, verb: "create", group: "batch", resource: "jobs", namespace: "kube-system"},
		{user: mgr, verb: "create", group: "batch", resource: "jobs", namespace: "team-a"},
		{user: mgr, verb: "create", group: "batch", resource: "jobs"},
		{user: mgr, verb: "create", resource: "pods", namespace: "kube-system"},
		{user: mgr, verb: "create", resource: "pods", namespace: r.ns},
		{user: mgr, verb: "get", resource: "pods", namespace: "kube-system"},
		{user: mgr, verb: "update", resource: "secrets", namespace: r.ns, name: r.objects[string(installsecret.ListIDKey)]},
		{user: mgr, verb: "delete", resource: "secrets", namespace: r.ns, name: r.objects[string(installsecret.CallbackSigning)]},
		{user: mgr, verb: "update", resource: "configmaps", namespace: r.ns, name: "another-configmap"},
		{user: api, verb: "get", resource: "secrets", namespace: r.ns, name: helmRecord},
		{user: api, verb: "get", resource: "secrets", namespace: "kube-system", name: "any"},
		{user: api, verb: "list", resource: "secrets"},
		{user: api, verb: "create", resource: "secrets", namespace: r.ns},
		{user: api, verb: "create", group: "lists.emaildata.io", resource: "emaillists", namespace: "team-a"},
		{user: api, verb: "update", resource: "configmaps", namespace: r.ns, name: "another-configmap"},
	}
	for _, ns := range []string{"", r.ns, "kube-system", "team-a", "team-b", r.keyNS} {
		for _, v := range []string{"list", "watch"} {
			refused = append(refused, access{user: mgr, verb: v, resource: "secrets", namespace: ns})
		}
	}
	allowed := []access{
		// The API key informer's list and watch, in the key namespace.
		{user: api, verb: "list", resource: "secrets", namespace: r.keyNS},
		{user: api, verb: "watch", resource: "secrets", namespace: r.keyNS},
	}
	if r.keyNS != r.ns {
		// Keys apart (the default): in the release namespace the API reads
		// the installation secrets by name (checkCallsAllowed) and nothing
		// else.
		refused = append(refused,
			access{user: api, verb: "list", resource: "secrets", namespace: r.ns},
			access{user: api, verb: "watch", resource: "secrets", namespace: r.ns},
			access{user: api, verb: "get", resource: "secrets", namespace: r.ns, name: "any"},
			access{user: api, verb: "list", resource: "secrets", namespace: "team-a"},
		)
	}
	if r.watched != nil {
		// Namespaced: nothing outside the watched namespaces, and in its
		// own namespace only the installation secrets, by name.
		refused = append(refused,
			access{user: mgr, verb: "get", resource: "secrets", namespace: "team-b", name: "any"},
			access{user: mgr, verb: "get", resource: "secrets", namespace: r.ns, name: helmRecord},
			access{user: mgr, verb: "list", group: "lists.emaildata.io", resource: "emaillists", namespace: "team-b"},
			access{user: mgr, verb: "list", group: "lists.emaildata.io", resource: "emaillists"},
		)
	} else {
		// Cluster-wide: a list's credentialsSecretRef may be in any
		// namespace, so the manager may get any Secret by name.
		allowed = append(allowed, access{user: mgr, verb: "get", resource: "secrets", namespace: "team-b", name: "any"})
	}
	for _, a := range refused {
		if tc.canI(t, a) {
			t.Errorf("kubectl auth can-i %s: yes, want no", a)
		}
	}
	for _, a := range allowed {
		if !tc.canI(t, a) {
			t.Errorf("kubectl auth can-i %s: no, want yes", a)
		}
	}
}

// TestChartInstallationNames: the chart names the counter, the Lease and
// the installation secrets as the binaries' defaults do for the release
// "emaildata" (so config/default and the chart agree), per release for
// any other, and an existing Secret named in values replaces the made one
// (and tells the manager not to make it).
func TestChartInstallationNames(t *testing.T) {
	def := readRelease(t, rbacSetups[0], renderChart(t, nil))
	want := map[string]string{controllers.ObjectLease: operator.DefaultLeaderElectionID, controllers.ObjectListIDCounter: "emaildata-list-ids"}
	for _, s := range installsecret.Specs() {
		want[string(s.Kind)] = installsecret.Config{}.Name(s.Kind)
	}
	for k, v := range want {
		if def.objects[k] != v {
			t.Errorf("defaults: %s named %q, want %q", k, def.objects[k], v)
		}
	}
	other := readRelease(t, rbacSetup{name: "other", release: "mail", ns: "mail-system"}, renderRelease(t, "mail", "mail-system", nil))
	for k, v := range other.objects {
		if !strings.HasPrefix(v, "mail-emaildata-") {
			t.Errorf("release mail: %s named %q, not after the release", k, v)
		}
	}
	objs := renderChart(t, map[string]any{"installationSecrets": map[string]any{"callbackSigning": map[string]any{"existingSecret": "vault-signing"}}})
	own := readRelease(t, rbacSetups[0], objs)
	if own.objects[string(installsecret.CallbackSigning)] != "vault-signing" {
		t.Errorf("callback signing Secret %q, want vault-signing", own.objects[string(installsecret.CallbackSigning)])
	}
	if v := renderedConfig(t, objs).Installation.ExternalSecrets; len(v) != 1 || v[0] != string(installsecret.CallbackSigning) {
		t.Errorf("installation.externalSecrets %q, want [%s]", v, installsecret.CallbackSigning)
	}
	if v := renderedConfig(t, renderChart(t, nil)).Installation.ExternalSecrets; len(v) != 0 {
		t.Errorf("installation.externalSecrets %q by default", v)
	}
}
