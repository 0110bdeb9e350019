package operator

import (
	"bytes"
	"os/exec"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestDefaultDeploymentRunsWorkersInItsNamespace renders config/default as
// `kubectl apply -k` would and checks what worker Jobs need: the manager
// passes the worker service account (its configuration's), which exists in the operator's
// namespace, and may delete Jobs there (and only there, by a Role).
func TestDefaultDeploymentRunsWorkersInItsNamespace(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is needed to render config/default")
	}
	out, err := exec.Command(kubectl, "kustomize", "../../config/default").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	var conf *cfgv1.Configuration
	var sa *corev1.ServiceAccount
	var role *rbacv1.Role
	var cluster *rbacv1.ClusterRole
	var binding *rbacv1.RoleBinding
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch {
		case meta.Kind == "ConfigMap" && meta.Metadata.Name == "emaildata-config":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(doc, &cm); err != nil {
				t.Fatal(err)
			}
			if conf, err = cfgv1.Decode([]byte(cm.Data["config.yaml"])); err != nil {
				t.Fatalf("config/manager/configuration.yaml: %v", err)
			}
		case meta.Kind == "ServiceAccount" && meta.Metadata.Name == "emaildata-worker":
			sa = &corev1.ServiceAccount{}
			_ = yaml.Unmarshal(doc, sa)
		case meta.Kind == "ClusterRole" && meta.Metadata.Name == "emaildata-manager-role":
			cluster = &rbacv1.ClusterRole{}
			_ = yaml.Unmarshal(doc, cluster)
		case meta.Kind == "Role" && meta.Metadata.Name == "emaildata-manager-role":
			role = &rbacv1.Role{}
			_ = yaml.Unmarshal(doc, role)
		case meta.Kind == "RoleBinding" && meta.Metadata.Name == "emaildata-manager-rolebinding":
			binding = &rbacv1.RoleBinding{}
			_ = yaml.Unmarshal(doc, binding)
		}
	}
	if conf == nil || conf.Executor.Jobs.ServiceAccountName != "emaildata-worker" {
		t.Fatalf("configuration %+v lacks executor.jobs.serviceAccountName emaildata-worker", conf)
	}
	if conf.Namespaces.Workers != "" {
		t.Errorf("configuration sets namespaces.workers %q; the default (the operator's namespace) is where the account and PVC are", conf.Namespaces.Workers)
	}
	if sa == nil || sa.Namespace != "emaildata-system" || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("worker service account %+v, want emaildata-worker in emaildata-system without a token", sa)
	}
	if role == nil || role.Namespace != "emaildata-system" || !grants(role.Rules, "jobs", "delete") || !grants(role.Rules, "jobs", "create") {
		t.Errorf("manager Role %+v, want create and delete on jobs in emaildata-system", role)
	}
	// Pods (to see one that cannot start) and the Job controller's events
	// (why it created none) are read there, and only there.
	if role == nil || !grants(role.Rules, "pods", "watch") || !grants(role.Rules, "events", "list") {
		t.Errorf("manager Role %+v, want watch on pods and list on events in emaildata-system", role)
	}
	switch {
	case cluster == nil:
		t.Error("no manager ClusterRole rendered")
	case grants(cluster.Rules, "pods", "list") || grants(cluster.Rules, "events", "list"):
		t.Errorf("manager ClusterRole grants reading pods or events in every namespace: %+v", cluster.Rules)
	}
	if binding == nil || binding.Namespace != "emaildata-system" || binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != "emaildata-manager-role" ||
		len(binding.Subjects) != 1 || binding.Subjects[0].Name != "emaildata-controller-manager" {
		t.Errorf("manager RoleBinding %+v", binding)
	}
}

func grants(rules []rbacv1.PolicyRule, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}
