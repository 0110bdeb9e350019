package deploy

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// endpoint is the part of a ServiceMonitor endpoint the tests read.
type endpoint struct {
	Port            string `json:"port"`
	Scheme          string `json:"scheme"`
	BearerTokenFile string `json:"bearerTokenFile"`
	Authorization   *struct {
		Type        string `json:"type"`
		Credentials struct {
			Name string `json:"name"`
			Key  string `json:"key"`
		} `json:"credentials"`
	} `json:"authorization"`
	TLSConfig *struct {
		InsecureSkipVerify bool                         `json:"insecureSkipVerify"`
		ServerName         string                       `json:"serverName"`
		CA                 map[string]map[string]string `json:"ca"`
	} `json:"tlsConfig"`
	Relabelings []map[string]any `json:"relabelings"`
}

func monitorEndpoint(t *testing.T, objs []*unstructured.Unstructured, name string) endpoint {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(find(t, objs, "ServiceMonitor", name).Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("%s has %d endpoints", name, len(eps))
	}
	var ep endpoint
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(eps[0].(map[string]any), &ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

func convert[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s: %v", key(o), err)
	}
	return &v
}

// TestChartServiceMonitors: the manager's ServiceMonitor authenticates with
// the current authorization field (no bearerTokenFile), by default with the
// token of a scraper account the chart binds to the metrics reader role and
// to nothing else; it verifies the manager's certificate for the metrics
// Service's name (against the metrics certificate's CA when the manager
// has one, or the CA given); both monitors name their job for the alerts.
func TestChartServiceMonitors(t *testing.T) {
	on := map[string]any{"enabled": true}
	objs := renderChart(t, map[string]any{"serviceMonitor": on})
	mgr := monitorEndpoint(t, objs, "emaildata-controller-manager-metrics-monitor")
	if mgr.BearerTokenFile != "" || mgr.Authorization == nil || mgr.Authorization.Type != "Bearer" ||
		mgr.Authorization.Credentials.Name != "emaildata-metrics-scraper-token" || mgr.Authorization.Credentials.Key != "token" {
		t.Errorf("manager endpoint authorization %+v, bearerTokenFile %q", mgr.Authorization, mgr.BearerTokenFile)
	}
	if mgr.TLSConfig == nil || mgr.TLSConfig.InsecureSkipVerify || mgr.TLSConfig.ServerName != "emaildata-controller-manager-metrics-service.emaildata-system.svc" || mgr.TLSConfig.CA != nil {
		t.Errorf("manager endpoint tlsConfig %+v: want verification for the metrics Service's name", mgr.TLSConfig)
	}
	for name, job := range map[string]string{"emaildata-controller-manager-metrics-monitor": "emaildata-manager", "emaildata-api-metrics-monitor": "emaildata-api"} {
		want := []map[string]any{{"action": "replace", "targetLabel": "job", "replacement": job}}
		if got := monitorEndpoint(t, objs, name).Relabelings; !reflect.DeepEqual(got, want) {
			t.Errorf("%s relabelings %v, want job %s", name, got, job)
		}
	}
	secret := convert[corev1.Secret](t, find(t, objs, "Secret", "emaildata-metrics-scraper-token"))
	sa := convert[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", "emaildata-metrics-scraper"))
	if secret.Type != corev1.SecretTypeServiceAccountToken || secret.Annotations[corev1.ServiceAccountNameKey] != sa.Name || secret.Namespace != releaseNS {
		t.Errorf("scraper token Secret %+v does not hold %s's token", secret.ObjectMeta, sa.Name)
	}
	crb := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "emaildata-metrics-scraper"))
	if crb.RoleRef.Name != "emaildata-metrics-reader" || !reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: releaseNS}}) {
		t.Errorf("scraper binding %+v", crb)
	}

	// A token Secret of one's own: no scraper account.
	objs = renderChart(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true,
		"authorization": map[string]any{"credentials": map[string]any{"name": "prom-token", "key": "t"}}}})
	if a := monitorEndpoint(t, objs, "emaildata-controller-manager-metrics-monitor").Authorization; a == nil || a.Credentials.Name != "prom-token" || a.Credentials.Key != "t" {
		t.Errorf("authorization %+v, want prom-token/t", a)
	}
	for _, o := range objs {
		if strings.Contains(o.GetName(), "metrics-scraper") {
			t.Errorf("%s rendered with a token Secret of one's own", key(o))
		}
	}

	// A metrics certificate: the manager serves it, Prometheus checks its CA.
	objs = renderChart(t, map[string]any{"serviceMonitor": on, "metrics": map[string]any{"certSecret": "emaildata-metrics-tls"}})
	want := map[string]map[string]string{"secret": {"name": "emaildata-metrics-tls", "key": "ca.crt"}}
	if tc := monitorEndpoint(t, objs, "emaildata-controller-manager-metrics-monitor").TLSConfig; tc == nil || !reflect.DeepEqual(tc.CA, want) {
		t.Errorf("tlsConfig %+v, want the certificate Secret's ca.crt", tc)
	}
	pod := deployment(t, objs, "emaildata-controller-manager").Spec.Template.Spec
	dir := chartConfig(t, objs, "emaildata").Metrics.CertDir
	mounted := false
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			mounted = mounted || (m.Name == v.Name && m.MountPath == dir && v.Secret != nil && v.Secret.SecretName == "emaildata-metrics-tls")
		}
	}
	if dir == "" || !mounted {
		t.Errorf("metrics.certDir %q, the certificate Secret mounted there: %v", dir, mounted)
	}
	objs = renderChart(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true, "tlsConfig": map[string]any{
		"ca": map[string]any{"configMap": map[string]any{"name": "corp-ca", "key": "ca.pem"}}, "serverName": "metrics.internal"}}})
	tc := monitorEndpoint(t, objs, "emaildata-controller-manager-metrics-monitor").TLSConfig
	if tc == nil || tc.ServerName != "metrics.internal" || !reflect.DeepEqual(tc.CA, map[string]map[string]string{"configMap": {"name": "corp-ca", "key": "ca.pem"}}) {
		t.Errorf("tlsConfig %+v, want the given CA and name", tc)
	}
}

// TestChartPrometheusServiceAccount: metrics.prometheusServiceAccount binds
// the metrics reader role to that account; without a namespace the render
// fails saying so.
func TestChartPrometheusServiceAccount(t *testing.T) {
	for _, o := range renderChart(t, nil) {
		if o.GetKind() == "ClusterRoleBinding" && o.GetName() == "emaildata-metrics-reader" {
			t.Errorf("a metrics reader binding is rendered without a Prometheus account")
		}
	}
	objs := renderChart(t, map[string]any{"metrics": map[string]any{"prometheusServiceAccount": map[string]any{"name": "prom", "namespace": "monitoring"}}})
	crb := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "emaildata-metrics-reader"))
	if crb.RoleRef.Name != "emaildata-metrics-reader" || !reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prom", Namespace: "monitoring"}}) {
		t.Errorf("binding %+v", crb)
	}
	_, err := renderChartErr(map[string]any{"metrics": map[string]any{"prometheusServiceAccount": map[string]any{"name": "prom"}}})
	if err == nil || !strings.Contains(err.Error(), "metrics.prometheusServiceAccount.namespace is empty") {
		t.Errorf("no namespace: error %v", err)
	}
}

// TestChartNetworkPolicyScrapers: with NetworkPolicies on, both metrics
// ports admit by default the Prometheus pods of the namespace monitoring
// (the labels the Prometheus Operator gives them, the namespace by the
// label Kubernetes sets on every namespace); scrapers.* change them,
// metricsFrom replaces them, an empty namespace is refused.
func TestChartNetworkPolicyScrapers(t *testing.T) {
	prometheusIn := func(ns string, labels map[string]string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: labels},
		}}
	}
	custom := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"metrics": "enabled"}}}}
	for _, tc := range []struct {
		name string
		np   map[string]any
		want []networkingv1.NetworkPolicyPeer
	}{
		{"default", nil, prometheusIn("monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"})},
		{"scrapers", map[string]any{"scrapers": map[string]any{"namespace": "observability", "podLabels": map[string]any{"app.kubernetes.io/name": nil, "app": "vmagent"}}},
			prometheusIn("observability", map[string]string{"app": "vmagent"})},
		{"metricsFrom", map[string]any{"metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"metrics": "enabled"}}}}}, custom},
	} {
		np := map[string]any{"enabled": true}
		for k, v := range tc.np {
			np[k] = v
		}
		objs := renderChart(t, map[string]any{"networkPolicy": np})
		for name, port := range map[string]int32{"emaildata-manager-ingress": 8443, "emaildata-api-ingress": 8091} {
			p := convert[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", name))
			i := slices.IndexFunc(p.Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
				return len(r.Ports) == 1 && r.Ports[0].Port.IntVal == port
			})
			if i < 0 || !reflect.DeepEqual(p.Spec.Ingress[i].From, tc.want) {
				t.Errorf("%s: %s admits %+v on %d, want %+v", tc.name, name, p.Spec.Ingress, port, tc.want)
			}
		}
	}
	_, err := renderChartErr(map[string]any{"networkPolicy": map[string]any{"enabled": true, "scrapers": map[string]any{"namespace": ""}}})
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.scrapers.namespace is empty") {
		t.Errorf("empty scrapers namespace: error %v", err)
	}
}

// TestMetricsReaderBindings asks a real kube-apiserver (SubjectAccessReview,
// as the manager's metrics filter and `kubectl auth can-i` do) what the
// rendered bindings grant: the chart's scraper account and a named
// Prometheus account may GET /metrics, and nothing else (no Secret, no
// other URL); an account bound to nothing may not.
func TestMetricsReaderBindings(t *testing.T) {
	t.Parallel() // a control plane of its own
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = authorizationv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objs := renderChart(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true},
		"metrics": map[string]any{"prometheusServiceAccount": map[string]any{"name": "prom", "namespace": "monitoring"}}})
	for _, o := range objs {
		if (o.GetKind() == "ClusterRole" && o.GetName() == "emaildata-metrics-reader") ||
			(o.GetKind() == "ClusterRoleBinding" && strings.HasPrefix(o.GetName(), "emaildata-metrics-")) {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("emaildata-test")); err != nil {
				t.Fatalf("%s: %v", key(o), err)
			}
		}
	}
	can := func(user string, attrs authorizationv1.SubjectAccessReviewSpec) bool {
		attrs.User = user
		attrs.Groups = []string{"system:serviceaccounts", "system:authenticated"}
		sar := &authorizationv1.SubjectAccessReview{Spec: attrs}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	metricsGet := authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}
	other := authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/debug/pprof/", Verb: "get"}}
	secrets := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: releaseNS, Verb: "get", Resource: "secrets"}}
	// The API server's authorizer learns of new bindings through its
	// informers: wait until both grants show (or fail), then every answer
	// is from a cache that holds all the bindings.
	bound := []string{"system:serviceaccount:" + releaseNS + ":emaildata-metrics-scraper", "system:serviceaccount:monitoring:prom"}
	deadline := time.Now().Add(30 * time.Second)
	for _, user := range bound {
		for !can(user, metricsGet) {
			if time.Now().After(deadline) {
				t.Fatalf("%s may not GET /metrics 30s after its binding", user)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		user    string
		metrics bool
	}{
		{bound[0], true},
		{bound[1], true},
		{"system:serviceaccount:monitoring:someone-else", false},
	} {
		if got := can(tc.user, metricsGet); got != tc.metrics {
			t.Errorf("%s may GET /metrics: %v, want %v", tc.user, got, tc.metrics)
		}
		if can(tc.user, other) || can(tc.user, secrets) {
			t.Errorf("%s may do more than GET /metrics", tc.user)
		}
	}
}
