package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

const (
	chartDir      = "../../../charts/emaildata"
	releaseName   = "emaildata"
	releaseNS     = "emaildata-system"
	kustomizeBase = "../../../config/default"
)

// renderChart renders the chart as `helm template emaildata charts/emaildata
// -n emaildata-system` would with vals over the chart's values.yaml.
func renderChart(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderChartErr(vals)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func renderChartErr(vals map[string]any) ([]*unstructured.Unstructured, error) {
	return renderReleaseFrom(nil, releaseName, releaseNS, vals)
}

// renderChartFrom renders the chart as an install (cluster nil: as `helm
// template`, lookup finds nothing) or as an upgrade against the cluster
// (lookup reads it, as `helm upgrade` does).
func renderChartFrom(cluster *rest.Config, vals map[string]any) ([]*unstructured.Unstructured, error) {
	return renderReleaseFrom(cluster, releaseName, releaseNS, vals)
}

// renderRelease renders the chart as the release name in namespace ns.
func renderRelease(t *testing.T, name, ns string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderReleaseErr(name, ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func renderReleaseErr(name, ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	return renderReleaseFrom(nil, name, ns, vals)
}

// renderReleaseFrom renders the chart as the release name in namespace ns,
// as an install or as an upgrade against the cluster (see renderChartFrom).
func renderReleaseFrom(cluster *rest.Config, name, ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	files, err := renderReleaseFilesFrom(cluster, name, ns, vals)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(files))
	for path := range files {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		if !strings.HasSuffix(path, ".yaml") || strings.HasPrefix(filepath.Base(path), "_") {
			continue
		}
		got, err := decodeDocs([]byte(files[path]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// renderFiles renders every template of the chart (NOTES.txt included),
// keyed by path, as `helm template` would with vals.
func renderFiles(vals map[string]any) (map[string]string, error) {
	return renderFilesFrom(nil, vals)
}

// renderFilesFresh is renderFiles rendering anew, never from renders:
// for the test that two renderings agree.
func renderFilesFresh(vals map[string]any) (map[string]string, error) {
	return renderOnce(nil, releaseName, releaseNS, vals)
}

// renders keeps the package's `helm template` renderings: its tests render
// the same values again and again, each time a chart load and template
// run (the tests without a control plane made 117 renderings, now 98).
// Keyed by release, namespace and the values' JSON (map keys sorted);
// callers get a copy.
var renders struct {
	sync.Mutex
	files map[string]renderResult
}

type renderResult struct {
	files map[string]string
	err   error
}

// renderFilesFrom is renderFiles as an install (cluster nil) or as an
// upgrade against the cluster (see renderChartFrom).
func renderFilesFrom(cluster *rest.Config, vals map[string]any) (map[string]string, error) {
	return renderReleaseFilesFrom(cluster, releaseName, releaseNS, vals)
}

// renderReleaseFilesFrom is renderFilesFrom as the release name in
// namespace ns. An install's rendering (cluster nil) comes from renders
// when the same one was made before.
func renderReleaseFilesFrom(cluster *rest.Config, name, ns string, vals map[string]any) (map[string]string, error) {
	if cluster != nil {
		return renderOnce(cluster, name, ns, vals)
	}
	js, err := json.Marshal(vals)
	if err != nil {
		return renderOnce(nil, name, ns, vals)
	}
	key := name + "\x00" + ns + "\x00" + string(js)
	renders.Lock()
	r, ok := renders.files[key]
	renders.Unlock()
	if !ok {
		r.files, r.err = renderOnce(nil, name, ns, vals)
		renders.Lock()
		if renders.files == nil {
			renders.files = map[string]renderResult{}
		}
		renders.files[key] = r
		renders.Unlock()
	}
	return maps.Clone(r.files), r.err
}

// renderOnce renders the chart (see renderReleaseFilesFrom).
func renderOnce(cluster *rest.Config, name, ns string, vals map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	opts := chartutil.ReleaseOptions{Name: name, Namespace: ns, Revision: 1, IsInstall: true}
	if cluster != nil {
		opts.Revision, opts.IsInstall, opts.IsUpgrade = 2, false, true
	}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClient(ch, rv, cluster)
	} else {
		files, err = engine.Render(ch, rv)
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return files, nil
}

// renderKustomize renders config/default as `kubectl apply -k` would.
func renderKustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return kustomize(t, kustomizeBase)
}

// kustomize renders a kustomization directory with kubectl.
func kustomize(t *testing.T, dir string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is needed to render the kustomizations")
	}
	out, err := exec.Command(kubectl, append([]string{"kustomize", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	objs, err := decodeDocs(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeDocs splits a YAML stream into objects, skipping empty documents.
func decodeDocs(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for i, doc := range docSep.Split(string(data), -1) {
		if len(bytes.TrimSpace([]byte(stripComments(doc)))) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion, kind or name:\n%s", i, doc)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// key names an object as kind/namespace/name.
func key(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}
