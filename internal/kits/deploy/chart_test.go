package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/operator"
)

// valueSets are the chart's value sets the tests render and dry-run.
var valueSets = []struct {
	name string
	vals map[string]any
}{
	{"defaults", nil},
	{"job executor, explicit", map[string]any{"executor": "job"}},
	{"local executor", map[string]any{"executor": "local"}},
	{"optional objects on", map[string]any{
		"namespace":           map[string]any{"create": true},
		"podDisruptionBudget": map[string]any{"enabled": true},
		"networkPolicy": map[string]any{"enabled": true, "workerExtraEgress": []any{map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.5.0/24"}}},
			"ports": []any{map[string]any{"port": 5432, "protocol": "TCP"}},
		}}},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"prometheusRule": map[string]any{"enabled": true},
		"dashboards":     map[string]any{"enabled": true},
		"argocd":         map[string]any{"healthChecks": map[string]any{"enabled": true}},
	}},
	{"object store, custom images and placement", customValues()},
	{"digest, OpenShift security contexts, one API replica", map[string]any{
		"image":              map[string]any{"digest": digestA},
		"worker":             map[string]any{"image": map[string]any{"pullPolicy": "Always"}, "activeDeadline": "36h"},
		"podSecurityContext": openShiftValues()["podSecurityContext"],
		"api":                map[string]any{"replicas": 1},
	}},
	{"namespaced, keys apart, own signing key", map[string]any{
		"watchNamespaces":     []any{"team-a", "team-b"},
		"apiKeys":             map[string]any{"namespace": "emaildata-keys"},
		"installationSecrets": map[string]any{"callbackSigning": map[string]any{"existingSecret": "vault-signing"}},
	}},
	{"renamed, no API, no user roles", map[string]any{
		"fullnameOverride": "acme-mail",
		"api":              map[string]any{"enabled": false},
		"rbac":             map[string]any{"userRoles": false},
		"store":            map[string]any{"pvc": map[string]any{"existingClaim": "shared-nfs"}},
	}},
}

func customValues() map[string]any {
	return map[string]any{
		"image":            map[string]any{"repository": "registry.example/emaildata", "tag": "1.2.3", "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
		"store": map[string]any{
			"url":               "s3://lists?region=eu-west-1",
			"credentialsSecret": "store-creds",
		},
		"manager": map[string]any{
			"replicas":     2,
			"resources":    map[string]any{"requests": map[string]any{"cpu": "200m", "memory": "256Mi"}},
			"nodeSelector": map[string]any{"pool": "system"},
			"extraArgs":    []any{"--log-level=debug"},
		},
		"api": map[string]any{
			"replicas": 3,
			"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a", "b"}}}}},
			}}},
			"tolerations": []any{map[string]any{"key": "system", "operator": "Exists", "effect": "NoSchedule"}},
		},
		"worker": map[string]any{
			"image":        map[string]any{"repository": "registry.example/emaildata-worker", "tag": "1.2.3-w"},
			"resources":    map[string]any{"requests": map[string]any{"cpu": "750m", "memory": "384Mi"}, "limits": map[string]any{"cpu": "2"}},
			"nodeSelector": map[string]any{"pool": "batch", "kubernetes.io/arch": "amd64"},
			"tolerations": []any{
				map[string]any{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
				map[string]any{"key": "spot", "operator": "Exists"},
			},
			"priorityClassName": "emaildata-batch",
		},
	}
}

func deployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(find(t, objs, "Deployment", name).Object, &d, true); err != nil {
		t.Fatalf("deployment %s: %v", name, err)
	}
	return &d
}

// TestChartValueSets renders every value set and checks that what is
// rendered refers only to what is rendered (or named in values), and that
// the optional objects come and go with their switches.
func TestChartValueSets(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := renderChart(t, vs.vals)
			checkReferences(t, objs)
			kinds := map[string]int{}
			keyNamespaces := 0
			for _, o := range objs {
				if o.GetKind() == "Namespace" && o.GetLabels()["app.kubernetes.io/component"] == "api-keys" {
					keyNamespaces++ // by default, not an optional object
					continue
				}
				kinds[o.GetKind()]++
			}
			// Made by default, with the API only.
			if want := map[bool]int{true: 0, false: 1}[vs.name == "renamed, no API, no user roles"]; keyNamespaces != want {
				t.Errorf("%d API key Namespaces rendered, want %d", keyNamespaces, want)
			}
			optional := vs.name == "optional objects on"
			for _, k := range []string{"NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Namespace"} {
				if (kinds[k] > 0) != optional {
					t.Errorf("%d %s objects rendered", kinds[k], k)
				}
			}
			// The API's PDB is on by default (as in config/default), off
			// without the API or with one replica.
			wantPDB := vs.name != "renamed, no API, no user roles" && vs.name != "digest, OpenShift security contexts, one API replica"
			if (kinds["PodDisruptionBudget"] == 1) != wantPDB {
				t.Errorf("%d PodDisruptionBudgets rendered, want one: %v", kinds["PodDisruptionBudget"], wantPDB)
			}
			if optional && (kinds["NetworkPolicy"] != 3 || kinds["ServiceMonitor"] != 2 || kinds["ConfigMap"] != 3) {
				t.Errorf("kinds %v: want 3 NetworkPolicies, 2 ServiceMonitors, 3 ConfigMaps (configuration, dashboards, Argo CD)", kinds)
			}
			if kinds["CustomResourceDefinition"] != 3 {
				t.Errorf("%d CRDs rendered", kinds["CustomResourceDefinition"])
			}
		})
	}
}

// checkReferences: bindings name rendered roles and accounts; pods use
// rendered accounts and claims.
func checkReferences(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	have := map[string]bool{}
	for _, o := range objs {
		have[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "RoleBinding", "ClusterRoleBinding":
			ref, _, _ := unstructured.NestedStringMap(o.Object, "roleRef")
			if !have[ref["kind"]+"/"+ref["name"]] {
				t.Errorf("%s %s binds %s %s, which is not rendered", o.GetKind(), o.GetName(), ref["kind"], ref["name"])
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				name := s.(map[string]any)["name"].(string)
				if !have["ServiceAccount/"+name] && !strings.HasSuffix(name, "-api") {
					t.Errorf("%s %s binds the missing ServiceAccount %s", o.GetKind(), o.GetName(), name)
				}
			}
		case "Deployment":
			d := deployment(t, objs, o.GetName())
			if sa := d.Spec.Template.Spec.ServiceAccountName; !have["ServiceAccount/"+sa] {
				t.Errorf("%s runs as the missing ServiceAccount %s", d.Name, sa)
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if pvc := v.PersistentVolumeClaim; pvc != nil && !have["PersistentVolumeClaim/"+pvc.ClaimName] && pvc.ClaimName != "shared-nfs" {
					t.Errorf("%s mounts the missing claim %s", d.Name, pvc.ClaimName)
				}
			}
			if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, intersect(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)) {
				t.Errorf("%s selector %v does not match its pods %v", d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
		}
	}
}

func intersect(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if b[k] == v {
			out[k] = v
		}
	}
	return out
}

func argValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestChartCustomValues: images, store, credentials, replicas, resources
// and placement reach the manager, the API and (through the configuration
// both read, loaded here by the binaries' own loader) the worker pods.
func TestChartCustomValues(t *testing.T) {
	objs := renderChart(t, customValues())
	mgr := deployment(t, objs, "emaildata-controller-manager")
	api := deployment(t, objs, "emaildata-api")
	mc, ac := mgr.Spec.Template.Spec.Containers[0], api.Spec.Template.Spec.Containers[0]
	if mc.Image != "registry.example/emaildata:1.2.3" || ac.Image != mc.Image || mc.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("images %s %s policy %s", mc.Image, ac.Image, mc.ImagePullPolicy)
	}
	if got := mgr.Spec.Template.Spec.ImagePullSecrets; len(got) != 1 || got[0].Name != "regcred" {
		t.Errorf("pull secrets %v", got)
	}
	if *mgr.Spec.Replicas != 2 || *api.Spec.Replicas != 3 {
		t.Errorf("replicas %d %d", *mgr.Spec.Replicas, *api.Spec.Replicas)
	}
	if mgr.Spec.Template.Spec.NodeSelector["pool"] != "system" || api.Spec.Template.Spec.Affinity == nil || len(api.Spec.Template.Spec.Tolerations) != 1 {
		t.Errorf("placement: manager %v, api %+v %v", mgr.Spec.Template.Spec.NodeSelector, api.Spec.Template.Spec.Affinity, api.Spec.Template.Spec.Tolerations)
	}
	if q := mc.Resources.Requests[corev1.ResourceCPU]; q.String() != "200m" {
		t.Errorf("manager cpu request %s", q.String())
	}
	if u := chartConfig(t, objs, "emaildata").Store.URL; u != "s3://lists?region=eu-west-1" {
		t.Errorf("store.url %q", u)
	}
	for _, c := range []corev1.Container{mc, ac} {
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "store-creds" {
			t.Errorf("%s envFrom %+v", c.Name, c.EnvFrom)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "store" {
				t.Errorf("%s mounts a store volume for an object store", c.Name)
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() == "PersistentVolumeClaim" {
			t.Errorf("a PVC is rendered for an object store")
		}
	}
	checkWorkerConfig(t, mc, chartConfig(t, objs, "emaildata").Executor.Jobs, chartConfig(t, objs, "emaildata").Store)
}

func checkWorkerConfig(t *testing.T, mc corev1.Container, j cfgv1.Jobs, store cfgv1.Store) {
	t.Helper()
	args := mc.Args
	if store.PVC != "" {
		t.Error("store.pvc set for an object store")
	}
	if j.EnvFromSecret != "store-creds" {
		t.Errorf("executor.jobs.envFromSecret %q", j.EnvFromSecret)
	}
	if !slices.Contains(args, "--log-level=debug") {
		t.Errorf("extraArgs missing from %v", args)
	}
	var workerImage string
	for _, e := range mc.Env {
		if e.Name == "WORKER_IMAGE" {
			workerImage = e.Value
		}
	}
	// executor.jobs.image empty: the manager takes $WORKER_IMAGE.
	if workerImage != "registry.example/emaildata-worker:1.2.3-w" || j.Image != "" {
		t.Errorf("worker image %q, executor.jobs.image %q", workerImage, j.Image)
	}
	r := j.Resources
	res, err := operator.WorkerResources(r.CPU.String(), r.Memory.String(), r.CPULimit.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Requests.Cpu().Equal(resource.MustParse("750m")) || !res.Requests.Memory().Equal(resource.MustParse("384Mi")) || !res.Limits.Cpu().Equal(resource.MustParse("2")) {
		t.Errorf("worker resources %+v", res)
	}
	if !reflect.DeepEqual(j.NodeSelector, map[string]string{"pool": "batch", "kubernetes.io/arch": "amd64"}) {
		t.Errorf("executor.jobs.nodeSelector %v", j.NodeSelector)
	}
	want := []cfgv1.Toleration{
		{Key: "dedicated", Operator: "Equal", Value: "batch", Effect: "NoSchedule"},
		{Key: "spot", Operator: "Exists"},
	}
	if !reflect.DeepEqual(j.Tolerations, want) {
		t.Errorf("executor.jobs.tolerations %+v", j.Tolerations)
	}
	if j.PriorityClassName != "emaildata-batch" {
		t.Errorf("executor.jobs.priorityClassName %q", j.PriorityClassName)
	}
}

// TestChartExecutor: the executor value becomes the configuration's
// executor.mode.
func TestChartExecutor(t *testing.T) {
	for _, tc := range []struct{ executor, want string }{{"job", "job"}, {"local", "local"}} {
		if got := chartConfig(t, renderChart(t, map[string]any{"executor": tc.executor}), "emaildata").Executor.Mode; got != tc.want {
			t.Errorf("executor %s: executor.mode %q, want %q", tc.executor, got, tc.want)
		}
	}
}

// TestChartHistoryKey: the two history keys are installation secrets
// (issues 30 and 31): the chart renders no Secret and puts no key in a pod
// spec (no HISTORY_KEY or FRAUD_HISTORY_KEY from a secretKeyRef); the
// manager and the API name the Secrets (--history-key-secret,
// --fraud-history-key-secret), which the manager makes and both read by
// name; installationSecrets.*.existingSecret names the installer's own
// (and --external-secrets says so); the former history.existingSecret
// fails with the way to its replacement; config.verification.history.scope
// is in the configuration both read (the manager passes it to workers).
func TestChartHistoryKey(t *testing.T) {
	for _, tc := range []struct {
		name, prefix   string
		vals           map[string]any
		history, fraud string
		external       string
		scope          string
		err            string
	}{
		{name: "defaults", prefix: "emaildata", history: "emaildata-history-key", fraud: "emaildata-fraud-history-key", scope: "tenant"},
		{name: "brought history key, shared scope", prefix: "emaildata", vals: map[string]any{
			"installationSecrets": map[string]any{"historyKey": map[string]any{"existingSecret": "vault-history"}},
			"config":              map[string]any{"verification": map[string]any{"history": map[string]any{"scope": "shared"}}}},
			history: "vault-history", fraud: "emaildata-fraud-history-key", external: "history-key", scope: "shared"},
		{name: "brought fraud key", prefix: "emaildata", vals: map[string]any{
			"installationSecrets": map[string]any{"fraudHistoryKey": map[string]any{"existingSecret": "vault-fraud"}}},
			history: "emaildata-history-key", fraud: "vault-fraud", external: "fraud-history-key", scope: "tenant"},
		{name: "renamed", prefix: "acme-mail", vals: map[string]any{"fullnameOverride": "acme-mail"},
			history: "acme-mail-history-key", fraud: "acme-mail-fraud-history-key", scope: "tenant"},
		{name: "former value", vals: map[string]any{"history": map[string]any{"existingSecret": "vault-history"}},
			err: "history.existingSecret moved to installationSecrets.historyKey.existingSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderChartErr(tc.vals)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("rendered (%v), want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.GetKind() == "Secret" {
					t.Errorf("the chart renders Secret %s", o.GetName())
				}
			}
			conf := chartConfig(t, objs, tc.prefix)
			if got := conf.Verification.History.Scope; got != tc.scope {
				t.Errorf("verification.history.scope %q, want %q", got, tc.scope)
			}
			for kind, want := range map[string]string{"history-key": tc.history, "fraud-history-key": tc.fraud} {
				if got := conf.Installation.Secrets[kind]; got != want {
					t.Errorf("installation.secrets.%s %q, want %q", kind, got, want)
				}
			}
			if got := strings.Join(conf.Installation.ExternalSecrets, ","); got != tc.external {
				t.Errorf("installation.externalSecrets %q, want %q", got, tc.external)
			}
			for _, d := range []string{tc.prefix + "-controller-manager", tc.prefix + "-api"} {
				c := deployment(t, objs, d).Spec.Template.Spec.Containers[0]
				for _, e := range c.Env {
					if e.Name == "HISTORY_KEY" || e.Name == "FRAUD_HISTORY_KEY" {
						t.Errorf("%s: %s in the pod spec (%+v): the manager makes the Secret and the process reads it by name", d, e.Name, e.ValueFrom)
					}
				}
				if strings.Contains(strings.Join(c.Args, " "), "-secret") {
					t.Errorf("%s: args %v name a Secret: the configuration names them", d, c.Args)
				}
			}
		})
	}
}

// TestChartRendersNoRandomValue: what GitOps tools need (issue 31): the
// chart renders the same manifests every time for the same values, so
// Argo CD or a `helm template` pipeline sees no drift between syncs and
// changes no key. Every value set is rendered twice and compared byte for
// byte (templates, NOTES.txt included); and no template calls a function
// whose output changes from one rendering to the next, nor lookup (which
// `helm template` and Argo CD answer with nothing) but in guard.yaml,
// where it only refuses an install.
func TestChartRendersNoRandomValue(t *testing.T) {
	for _, vs := range valueSets {
		first, err := renderFilesFresh(vs.vals)
		if err != nil {
			t.Fatal(err)
		}
		second, err := renderFilesFresh(vs.vals)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) < 10 || !reflect.DeepEqual(first, second) {
			for path, f := range first {
				if second[path] != f {
					t.Errorf("%s: %s rendered differently twice", vs.name, path)
				}
			}
			t.Fatalf("%s: %d files the first time, %d the second", vs.name, len(first), len(second))
		}
	}
	changing := regexp.MustCompile(`\b(rand[A-Za-z]*|uuidv4|genPrivateKey|genCA|genCAWithKey|genSelfSignedCert|genSelfSignedCertWithKey|genSignedCert|genSignedCertWithKey|derivePassword|htpasswd|now|date|dateInZone|unixEpoch|lookup)\b`)
	action := regexp.MustCompile(`(?s){{.*?}}`)
	paths, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("templates: %v (%d)", err, len(paths))
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range action.FindAllString(string(b), -1) {
			if strings.HasPrefix(a, "{{/*") || strings.HasPrefix(a, "{{- /*") {
				continue // a comment
			}
			if m := changing.FindString(a); m != "" && !(m == "lookup" && filepath.Base(path) == "guard.yaml") {
				t.Errorf("%s: %s in %q", filepath.Base(path), m, a)
			}
		}
	}
}

// TestChartListLimits: the list file limits are one setting, in the one
// configuration the API (which checks an upload) and the manager (which
// prepares it) both mount, so a zip the API accepts is one the manager
// takes; unset, both keep the configuration's defaults.
func TestChartListLimits(t *testing.T) {
	def := cfgv1.Default().Pipeline.Limits
	for _, tc := range []struct {
		name string
		vals map[string]any
		want [3]int64
	}{
		{"defaults", nil, [3]int64{def.MaxExpandedBytes.Value(), def.MaxRecordBytes.Value(), def.MaxExpansionRatio}},
		{"set", map[string]any{"config": map[string]any{"pipeline": map[string]any{"limits": map[string]any{
			"maxExpandedBytes": "3221225472", "maxRecordBytes": 65536, "maxExpansionRatio": 50}}}},
			[3]int64{3221225472, 65536, 50}},
	} {
		objs := renderChart(t, tc.vals)
		l := chartConfig(t, objs, "emaildata").Pipeline.Limits
		if got := [3]int64{l.MaxExpandedBytes.Value(), l.MaxRecordBytes.Value(), l.MaxExpansionRatio}; got != tc.want {
			t.Errorf("%s: limits %v, want %v", tc.name, got, tc.want)
		}
		for _, name := range []string{"emaildata-controller-manager", "emaildata-api"} {
			checkMountsConfig(t, deployment(t, objs, name))
		}
	}
}

// TestChartAPIKeyNamespace: the key namespace is per release, rendered
// only when the chart is to make it and it is not the release namespace,
// named in the configuration unless it is the release namespace (the
// binaries' default), and a derived name too long for a namespace is
// refused (never cut short into another release's).
func TestChartAPIKeyNamespace(t *testing.T) {
	long := strings.Repeat("n", 55)
	keys := func(ns string, create bool) map[string]any {
		return map[string]any{"apiKeys": map[string]any{"namespace": ns, "createNamespace": create}}
	}
	for _, tc := range []struct {
		name, release, ns string
		vals              map[string]any
		made, configured  string // the rendered key Namespace, namespaces.apiKeys ("" none)
		wantErr           string
	}{
		{"default", "mail-a", "ops", nil, "ops-mail-a-keys", "ops-mail-a-keys", ""},
		{"another release, same namespace", "mail-b", "ops", nil, "ops-mail-b-keys", "ops-mail-b-keys", ""},
		{"existing namespace", "mail-a", "ops", keys("keys", false), "", "keys", ""},
		{"named, made", "mail-a", "ops", keys("keys", true), "keys", "keys", ""},
		{"release namespace", "mail-a", "ops", keys("ops", true), "", "", ""},
		{"too long", "mail-a", long, nil, "", "", "set apiKeys.namespace"},
		{"too long, named", "mail-a", long, keys("keys", true), "keys", "keys", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderReleaseErr(tc.release, tc.ns, tc.vals)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("render: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var made []string
			for _, o := range objs {
				if o.GetKind() != "Namespace" {
					continue
				}
				made = append(made, o.GetName())
				if o.GetAnnotations()["helm.sh/resource-policy"] != "keep" || o.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
					t.Errorf("Namespace %s: annotations %v, labels %v", o.GetName(), o.GetAnnotations(), o.GetLabels())
				}
			}
			if strings.Join(made, ",") != tc.made {
				t.Errorf("Namespaces rendered %v, want %q", made, tc.made)
			}
			if n := renderedConfig(t, objs).Namespaces.APIKeys; n != tc.configured {
				t.Errorf("namespaces.apiKeys %q, want %q", n, tc.configured)
			}
		})
	}
}
