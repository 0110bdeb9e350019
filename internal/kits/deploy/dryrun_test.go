package deploy

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// TestServerSideDryRun applies (server-side apply, dryRun=All) every object
// config/default renders and every object the chart renders for each value
// set, the optional config/network-policy and config/prometheus, and the
// first list NOTES.txt gives, against a real kube-apiserver, so schemas,
// defaults and validation are the API server's. The chart's CRDs are
// applied for real first: the rendered EmailLists and Purchases need them,
// and they must install.
//
// The Prometheus Operator's CRDs are not part of this repository: stand-ins
// that accept any object check that ServiceMonitor and PrometheusRule are
// well-formed objects of those kinds only; their PromQL is checked by
// TestAlertRules.
func TestServerSideDryRun(t *testing.T) {
	t.Parallel() // a control plane of its own
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	env := &envtest.Environment{CRDs: monitoringStandIns()}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The release's, and those the namespaced value set grants Roles in.
	for _, ns := range []string{releaseNS, "team-a", "team-b", "emaildata-keys"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	installCRDs(ctx, t, cfg, c, renderChart(t, nil))

	sets := map[string][]*unstructured.Unstructured{"config/default": renderKustomize(t),
		"config/network-policy and config/prometheus": renderOptionalConfig(t)}
	for _, vs := range valueSets {
		sets["chart "+vs.name] = renderChart(t, vs.vals)
		// A dry run creates nothing: the key namespace the chart renders
		// must exist for its Role to pass.
		for _, o := range sets["chart "+vs.name] {
			if o.GetKind() == "Namespace" && o.GetName() != releaseNS {
				if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetName()}}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
		}
	}
	// The first list NOTES.txt tells an installer to apply.
	example := notesExample(t, renderNotes(t, nil))
	for _, o := range example {
		o.SetNamespace(releaseNS)
	}
	sets["NOTES.txt's first list"] = example
	for name, objs := range sets {
		t.Run(name, func(t *testing.T) {
			for _, o := range objs {
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
					client.DryRunAll, client.ForceOwnership, client.FieldOwner("emaildata-test")); err != nil {
					t.Errorf("%s: %v", key(o), err)
				}
			}
		})
	}
	t.Run("history key kept on upgrade", func(t *testing.T) { historyKeyKept(ctx, t, cfg, c) })
}

// historyKeyKept: an upgrade from a chart that made the history key
// Secret itself (with lookup and a random key, kept on uninstall and when
// no longer rendered by helm.sh/resource-policy: keep) renders, against
// the cluster holding that Secret as `helm upgrade` does, the same objects
// as `helm template` (no Secret, no lookup answer used), and names that
// Secret as the installation secret; the manager finds it usable as it is
// (its field HISTORY_KEY) and changes nothing, so the history keeps its
// key.
func historyKeyKept(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client) {
	const key = "the-key-made-at-install-0123456789abcdef"
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: releaseName + "-history-key",
		Annotations: map[string]string{"helm.sh/resource-policy": "keep"}},
		Data: map[string][]byte{"HISTORY_KEY": []byte(key)}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	// The CRDs are the test's, applied without a release: the chart's guard
	// would refuse them.
	vals := map[string]any{"crds": map[string]any{"install": false}}
	upgrade, err := renderChartFrom(cfg, vals)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffPaths("", objectMap(upgrade), objectMap(renderChart(t, vals))); len(d) > 0 {
		t.Errorf("an upgrade against the cluster renders other objects than helm template: %v", d)
	}
	if got := renderedConfig(t, upgrade).Installation.Secrets[string(installsecret.HistoryKey)]; got != sec.Name {
		t.Fatalf("installation.secrets.history-key %q, want the kept %s", got, sec.Name)
	}
	states, err := operator.EnsureInstallationSecrets(ctx, c, c, releaseNS, installsecret.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if st.Kind == installsecret.HistoryKey && (st.Created || st.Unusable != "" || st.Missing) {
			t.Errorf("the kept Secret: %+v, want it used as it is", st)
		}
	}
	var kept corev1.Secret
	if err := c.Get(ctx, client.ObjectKeyFromObject(sec), &kept); err != nil || !reflect.DeepEqual(kept.Data, sec.Data) {
		t.Errorf("the kept Secret now holds %v (%v)", kept.Data, err)
	}
	spec, _ := installsecret.Lookup(installsecret.HistoryKey)
	if field, got, err := spec.Find(kept.Data); err != nil || field != "HISTORY_KEY" || string(got) != string(sec.Data["HISTORY_KEY"]) {
		t.Errorf("its key from %q (%v), want the installed one from HISTORY_KEY", field, err)
	}
}

// objectMap maps each object's kind/namespace/name to its content.
func objectMap(objs []*unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for _, o := range objs {
		out[key(o)] = o.Object
	}
	return out
}

// installCRDs applies the rendered CRDs and waits until they serve.
func installCRDs(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("emaildata-test")); err != nil {
			t.Fatalf("install %s: %v", o.GetName(), err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, &crd)
	}
	if err := envtest.WaitForCRDs(cfg, crds, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

// monitoringStandIns are minimal CRDs for the Prometheus Operator kinds the
// chart renders, accepting any spec.
func monitoringStandIns() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, k := range []struct{ kind, plural string }{{"ServiceMonitor", "servicemonitors"}, {"PrometheusRule", "prometheusrules"}} {
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, Plural: k.plural},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", XPreserveUnknownFields: ptr(true)},
						},
						Required: []string{"spec"},
					}},
				}},
			},
		})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
