package operator

import (
	"bytes"
	"os/exec"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// rendered holds the objects `kubectl kustomize dir` renders, by kind and name.
type rendered map[string][]byte

func render(t *testing.T, dirs ...string) rendered {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is needed to render config/")
	}
	out := rendered{}
	for _, dir := range dirs {
		data, err := exec.Command(kubectl, "kustomize", dir).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct{ Name string }
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatal(err)
			}
			out[meta.Kind+"/"+meta.Metadata.Name] = doc
		}
	}
	return out
}

func (r rendered) get(t *testing.T, kindName string, into any) {
	t.Helper()
	doc, ok := r[kindName]
	if !ok {
		t.Fatalf("%s is not rendered", kindName)
	}
	if err := yaml.Unmarshal(doc, into); err != nil {
		t.Fatalf("%s: %v", kindName, err)
	}
}

// containerPort is the port named name of d's first container.
func containerPort(d *appsv1.Deployment, name string) int32 {
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// TestDefaultDeploymentMetrics checks how config/ exposes metrics: the
// manager's over HTTPS with the rights its authn/authz filter needs and a
// reader role, the API's on their own port and Service, which the
// ServiceMonitors select, and the API's PodDisruptionBudget.
func TestDefaultDeploymentMetrics(t *testing.T) {
	r := render(t, "../../config/default", "../../config/prometheus")
	var mgr, api appsv1.Deployment
	r.get(t, "Deployment/emaildata-controller-manager", &mgr)
	r.get(t, "Deployment/emaildata-api", &api)
	args := func(d *appsv1.Deployment) []string { return d.Spec.Template.Spec.Containers[0].Args }
	if !slices.Contains(args(&mgr), "--metrics-bind-address=:8443") || containerPort(&mgr, "metrics") != 8443 {
		t.Errorf("manager: args %v, metrics port %d; want HTTPS metrics on :8443", args(&mgr), containerPort(&mgr, "metrics"))
	}
	if !slices.Contains(args(&api), "--metrics-bind-address=:8091") || containerPort(&api, "metrics") != 8091 {
		t.Errorf("API: args %v, metrics port %d; want metrics on :8091", args(&api), containerPort(&api, "metrics"))
	}

	var role, reader rbacv1.ClusterRole
	r.get(t, "ClusterRole/emaildata-manager-role", &role)
	r.get(t, "ClusterRole/emaildata-metrics-reader", &reader)
	for _, res := range []string{"tokenreviews", "subjectaccessreviews"} {
		if !grants(role.Rules, res, "create") {
			t.Errorf("the manager's ClusterRole cannot create %s (its metrics filter needs it)", res)
		}
	}
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("metrics reader rules %+v, want get on /metrics only", reader.Rules)
	}

	monitors := []struct{ monitor, service, port, scheme string }{
		{"controller-manager-metrics-monitor", "emaildata-controller-manager-metrics-service", "https", "https"},
		{"api-metrics-monitor", "emaildata-api-metrics", "metrics", "http"},
	}
	for _, m := range monitors {
		var mon struct {
			Spec struct {
				Endpoints []struct{ Port, Scheme string }
				Selector  struct{ MatchLabels map[string]string }
			}
		}
		var svc corev1.Service
		r.get(t, "ServiceMonitor/"+m.monitor, &mon)
		r.get(t, "Service/"+m.service, &svc)
		sel := labels.SelectorFromSet(mon.Spec.Selector.MatchLabels)
		if !sel.Matches(labels.Set(svc.Labels)) {
			t.Errorf("%s selects %v; %s has labels %v", m.monitor, sel, m.service, svc.Labels)
		}
		if len(mon.Spec.Endpoints) != 1 || mon.Spec.Endpoints[0].Port != m.port || mon.Spec.Endpoints[0].Scheme != m.scheme ||
			len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != m.port {
			t.Errorf("%s endpoints %+v, %s ports %+v: want port %s over %s", m.monitor, mon.Spec.Endpoints, m.service, svc.Spec.Ports, m.port, m.scheme)
		}
	}
	var public corev1.Service
	r.get(t, "Service/emaildata-api", &public)
	for _, p := range public.Spec.Ports {
		if p.TargetPort.String() == "metrics" || p.TargetPort.IntValue() == 8091 {
			t.Errorf("the API's public Service exposes its metrics port: %+v", p)
		}
	}

	var pdb policyv1.PodDisruptionBudget
	r.get(t, "PodDisruptionBudget/emaildata-api", &pdb)
	sel, err := metav1LabelSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(api.Spec.Template.Labels)) || pdb.Spec.MinAvailable == nil ||
		pdb.Spec.MinAvailable.IntValue() < 1 || int32(pdb.Spec.MinAvailable.IntValue()) >= *api.Spec.Replicas {
		t.Errorf("API PDB %+v does not keep some but not all of %d replicas", pdb.Spec, *api.Spec.Replicas)
	}
}

// TestNetworkPolicies checks config/network-policy against config/default:
// each policy selects the pods it is for, and admits exactly their
// metrics and API ports; workers may reach DNS, SMTP and the stores.
func TestNetworkPolicies(t *testing.T) {
	r := render(t, "../../config/default")
	np := render(t, "../../config/network-policy")
	var mgr, api appsv1.Deployment
	r.get(t, "Deployment/emaildata-controller-manager", &mgr)
	r.get(t, "Deployment/emaildata-api", &api)
	// The labels JobExecutor gives worker pods (controllers/job_executor.go).
	worker := labels.Set{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "worker"}
	cases := []struct {
		policy  string
		pods    labels.Set
		ingress []int32
		egress  []int32
	}{
		{"manager-ingress", mgr.Spec.Template.Labels, []int32{containerPort(&mgr, "metrics")}, nil},
		{"api-ingress", api.Spec.Template.Labels, []int32{containerPort(&api, "http"), containerPort(&api, "metrics")}, nil},
		{"worker-egress", worker, nil, []int32{53, 53, 25, 443, 5432, 6379}},
	}
	for _, tc := range cases {
		var p networkingv1.NetworkPolicy
		np.get(t, "NetworkPolicy/"+tc.policy, &p)
		if p.Namespace != "emaildata-system" {
			t.Errorf("%s in namespace %q", tc.policy, p.Namespace)
		}
		sel, err := metav1LabelSelector(&p.Spec.PodSelector)
		if err != nil || !sel.Matches(tc.pods) {
			t.Errorf("%s selects %v, not the pods %v", tc.policy, sel, tc.pods)
		}
		var in, out []int32
		for _, rule := range p.Spec.Ingress {
			for _, port := range rule.Ports {
				in = append(in, port.Port.IntVal)
			}
		}
		for _, rule := range p.Spec.Egress {
			for _, port := range rule.Ports {
				out = append(out, port.Port.IntVal)
			}
		}
		if !slices.Equal(in, tc.ingress) || !slices.Equal(out, tc.egress) {
			t.Errorf("%s admits ingress %v and egress %v, want %v and %v", tc.policy, in, out, tc.ingress, tc.egress)
		}
	}
}

func metav1LabelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s)
}
