package controllers_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestDatasetsNotAggregated: no ClusterRole that aggregates into the
// built-in admin, edit or view roles lets anyone write Datasets: the people
// store they load is every namespace's, so only administrators (bound to
// dataset-editor-role explicitly) may create them.
func TestDatasetsNotAggregated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "config", "rbac", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no RBAC manifests: %v", err)
	}
	aggregated := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var role rbacv1.ClusterRole
			if err := yaml.Unmarshal([]byte(doc), &role); err != nil || role.Kind != "ClusterRole" {
				continue
			}
			if !aggregates(role.Labels) {
				continue
			}
			aggregated++
			for _, r := range role.Rules {
				if grantsDatasetWrite(r) {
					t.Errorf("%s: ClusterRole %s aggregates into the built-in roles and grants %v on %v", filepath.Base(f), role.Name, r.Verbs, r.Resources)
				}
			}
		}
	}
	if aggregated == 0 {
		t.Fatal("no aggregated ClusterRole found; the test reads the wrong files")
	}
}

func aggregates(labels map[string]string) bool {
	for _, l := range []string{"admin", "edit", "view"} {
		if labels["rbac.authorization.k8s.io/aggregate-to-"+l] == "true" {
			return true
		}
	}
	return false
}

func grantsDatasetWrite(r rbacv1.PolicyRule) bool {
	group := slices.Contains(r.APIGroups, "lists.emaildata.io") || slices.Contains(r.APIGroups, "*")
	res := slices.Contains(r.Resources, "datasets") || slices.Contains(r.Resources, "*")
	write := slices.ContainsFunc(r.Verbs, func(v string) bool {
		return v == "*" || v == "create" || v == "update" || v == "patch" || v == "delete" || v == "deletecollection"
	})
	return group && res && write
}
