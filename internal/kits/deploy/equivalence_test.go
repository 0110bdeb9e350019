package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// Labels and annotations Helm adds or that name the tool: they may differ
// between the chart and config/default. Everything else must be equal.
var toolLabels = map[string]bool{
	"app.kubernetes.io/name":       true,
	"app.kubernetes.io/instance":   true,
	"app.kubernetes.io/managed-by": true,
	"app.kubernetes.io/version":    true,
	"helm.sh/chart":                true,
}

// TestChartMatchesConfigDefault: the chart with its default values renders
// the objects config/default renders (same kinds, names and namespaces),
// and each one is equal field by field (spec, rules, subjects, CRD
// schemas, images, args, ports, probes, volumes...) except for the tool
// labels above and the chart's keep annotation on the CRDs, with the API
// keys in the release namespace, as config/default has them. The other
// difference of the defaults is the Namespace, which `helm install
// --create-namespace` makes (namespace.create=true renders it too). Neither
// renders a Secret holding a key: the manager makes the installation
// secrets, for both alike.
func TestChartMatchesConfigDefault(t *testing.T) {
	kust := byKey(renderKustomize(t))
	for _, tc := range []struct {
		name   string
		vals   map[string]any
		wantNS bool
	}{
		{"defaults", nil, false},
		{"namespace.create", map[string]any{"namespace": map[string]any{"create": true}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// config/default keeps the API keys in its own namespace (a
			// kustomize namespace puts every object in one; docs/install.md
			// says what that grants); the chart makes a key namespace.
			vals := map[string]any{"apiKeys": map[string]any{"namespace": releaseNS}}
			maps.Copy(vals, tc.vals)
			chart := byKey(renderChart(t, vals))
			var missing, extra []string
			for k, want := range kust {
				got, ok := chart[k]
				if !ok {
					if want.GetKind() != "Namespace" || tc.wantNS {
						missing = append(missing, k)
					}
					continue
				}
				if d := diffPaths("", normalize(want).Object, normalize(got).Object); len(d) > 0 {
					t.Errorf("%s differs from config/default at:\n  %v", k, d)
				}
			}
			for k := range chart {
				if _, ok := kust[k]; !ok {
					extra = append(extra, k)
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			if len(missing) > 0 {
				t.Errorf("the chart lacks %v", missing)
			}
			if len(extra) > 0 {
				t.Errorf("the chart renders objects config/default does not: %v", extra)
			}
			if len(kust) < 20 {
				t.Fatalf("config/default rendered only %d objects", len(kust))
			}
		})
	}
}

// TestChartMatchesOptionalConfig: the optional parts config/default leaves
// commented out (../network-policy and ../prometheus), rendered as if they
// were uncommented, equal what the chart adds to its defaults with
// networkPolicy and serviceMonitor enabled.
func TestChartMatchesOptionalConfig(t *testing.T) {
	want := byKey(renderOptionalConfig(t))
	base := byKey(renderChart(t, nil))
	chart := map[string]*unstructured.Unstructured{}
	for k, o := range byKey(renderChart(t, map[string]any{"networkPolicy": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true}})) {
		if _, ok := base[k]; !ok {
			chart[k] = o
		}
	}
	if len(want) != 8 {
		t.Errorf("config/network-policy and config/prometheus rendered %d objects, want 3 policies, 2 monitors, and the scraper's account, token and binding", len(want))
	}
	for k, w := range want {
		got, ok := chart[k]
		if !ok {
			t.Errorf("the chart lacks %s", k)
			continue
		}
		if d := diffPaths("", normalize(w).Object, normalize(got).Object); len(d) > 0 {
			t.Errorf("%s differs from config at:\n  %v", k, d)
		}
	}
	for k := range chart {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which config does not", k)
		}
	}
}

// renderOptionalConfig renders config/network-policy and config/prometheus
// as config/default would with them uncommented (prefixed, in its namespace).
func renderOptionalConfig(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	var res []string
	for _, d := range []string{"network-policy", "prometheus"} {
		abs, err := filepath.Abs(filepath.Join("../../../config", d))
		if err != nil {
			t.Fatal(err)
		}
		// kustomize takes relative paths only (and, outside the root,
		// with --load-restrictor LoadRestrictionsNone).
		rel, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, "- "+rel)
	}
	kust := "namespace: " + releaseNS + "\nnamePrefix: emaildata-\nresources:\n" + strings.Join(res, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, dir, "--load-restrictor", "LoadRestrictionsNone")
}

// normalize drops what may differ by tool: tool labels, the chart's keep
// annotation, and empty label or annotation maps.
func normalize(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	labels := c.GetLabels()
	for k := range labels {
		if toolLabels[k] {
			delete(labels, k)
		}
	}
	ann := c.GetAnnotations()
	delete(ann, "helm.sh/resource-policy")
	// The chart rolls its pods on a change of its configuration;
	// kustomize's ConfigMap is a plain one (same name), restarted by hand.
	delete(ann, "checksum/config")
	if a, ok, _ := unstructured.NestedStringMap(c.Object, "spec", "template", "metadata", "annotations"); ok {
		delete(a, "checksum/config")
		_ = unstructured.SetNestedStringMap(c.Object, a, "spec", "template", "metadata", "annotations")
	}
	canonicalConfig(c)
	// Set* keep an empty map; an absent one must compare equal to it.
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	if len(labels) > 0 {
		c.SetLabels(labels)
	}
	if len(ann) > 0 {
		c.SetAnnotations(ann)
	}
	return c
}

// diffPaths lists the paths at which a and b differ.
func diffPaths(path string, a, b any) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		var out []string
		for k := range keys {
			out = append(out, diffPaths(path+"."+k, am[k], bm[k])...)
		}
		sort.Strings(out)
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffPaths(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	return []string{fmt.Sprintf("%s: config/default %v, chart %v", path, a, b)}
}

// canonicalConfig replaces a Configuration ConfigMap's document by its
// decoded form (the binaries' loader), so that config/'s commented file
// and the chart's rendering compare by what they configure.
func canonicalConfig(u *unstructured.Unstructured) {
	data, ok, _ := unstructured.NestedString(u.Object, "data", "config.yaml")
	if u.GetKind() != "ConfigMap" || !ok {
		return
	}
	c, err := cfgv1.Decode([]byte(data))
	if err != nil {
		_ = unstructured.SetNestedField(u.Object, "invalid: "+err.Error(), "data", "config.yaml")
		return
	}
	j, _ := json.Marshal(c)
	_ = unstructured.SetNestedField(u.Object, string(j), "data", "config.yaml")
}
