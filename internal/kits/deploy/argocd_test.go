package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartArgoCDHealthChecks: argocd.healthChecks.enabled renders the keys
// argocd-cm takes, one per kind, holding the shipped Lua unchanged (the
// checks themselves are tested in internal/kits/argocdhealth and controllers).
func TestChartArgoCDHealthChecks(t *testing.T) {
	cm := find(t, renderChart(t, map[string]any{"argocd": map[string]any{"healthChecks": map[string]any{"enabled": true, "namespace": "argocd"}}}),
		"ConfigMap", "emaildata-argocd-health")
	if cm.GetNamespace() != "argocd" {
		t.Errorf("namespace %q, want argocd", cm.GetNamespace())
	}
	data, _ := cm.Object["data"].(map[string]any)
	kinds := []string{"Dataset", "EmailList", "Purchase"}
	if len(data) != len(kinds) {
		t.Errorf("keys %v, want one per kind %v", data, kinds)
	}
	for _, kind := range kinds {
		want, err := os.ReadFile(filepath.Join(chartDir, "files/argocd", kind+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := data["resource.customizations.health.lists.emaildata.io_"+kind].(string)
		if got != strings.TrimSuffix(string(want), "\n") {
			t.Errorf("%s: the ConfigMap's check differs from files/argocd/%s.lua", kind, kind)
		}
	}
}
