package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/emaildata/emaildata/internal/wiring"
)

// TestKustomizePatchRefusesTypos: an overlay of config/default that
// patches the Configuration (config/manager/configuration.yaml, the
// ConfigMap emaildata-config) renders what it says, and the binaries'
// own loader (wiring.LoadConfig, what the manager and the API run at
// start on the mounted file) refuses a misspelt key, an unknown section
// or a value of the wrong kind with its path and line: kustomize cannot
// check a file held in a ConfigMap's string, the start does.
func TestKustomizePatchRefusesTypos(t *testing.T) {
	const head = "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nstore:\n  url: file:///var/lib/emaildata/store\n"
	for _, tc := range []struct {
		name string
		body string   // below head, in the patched config.yaml
		want []string // in the loader's error; none: it loads
	}{
		{"a good patch", "verification:\n  smtp:\n    heloName: verify.example.com\n", nil},
		{"misspelt key", "verification:\n  smtp:\n    heloNmae: verify.example.com\n",
			[]string{"line 7", `"verification.smtp.heloNmae"`, "heloName"}},
		{"unknown section", "verifcation:\n  smtp:\n    heloName: verify.example.com\n", []string{"line 5", `"verifcation"`}},
		{"wrong kind", "verification:\n  smtp:\n    maxConnsPerHost: many\n", []string{"verification.smtp.maxConnsPerHost"}},
		{"invalid value", "executor:\n  jobs:\n    parallelism: -1\n", []string{"executor.jobs.parallelism"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each renders in a directory of its own with kubectl
			data := patchedConfig(t, head+tc.body)
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := wiring.LoadConfig(path)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("the patched configuration does not load: %v\n%s", err, data)
				}
				if c.Verification.SMTP.HELOName != "verify.example.com" {
					t.Errorf("heloName %q, want the patch's", c.Verification.SMTP.HELOName)
				}
				return
			}
			if err == nil || c != nil {
				t.Fatalf("loaded (%v), want it refused:\n%s", c != nil, data)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// patchedConfig renders config/default with a strategic merge patch that
// sets the ConfigMap's config.yaml to body, and returns what the pods
// would mount.
func patchedConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Abs(kustomizeBase)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	patch := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: emaildata-config\n  namespace: " + releaseNS + "\ndata:\n  config.yaml: |\n"
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		patch += "    " + line + "\n"
	}
	kust := "resources:\n- " + rel + "\npatches:\n- path: config-patch.yaml\n"
	for name, data := range map[string]string{"kustomization.yaml": kust, "config-patch.yaml": patch} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cm := find(t, kustomize(t, dir, "--load-restrictor", "LoadRestrictionsNone"), "ConfigMap", "emaildata-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	if data != body {
		t.Fatalf("the patch did not apply: config.yaml is\n%s", data)
	}
	return data
}
