package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/api/kubescheme"
)

// testCluster is a real kube-apiserver and etcd (envtest), with an admin
// client and a kubeconfig file for kubectl and Helm.
type testCluster struct {
	cfg        *rest.Config
	c          client.Client
	kubeconfig string
}

// startCluster starts a control plane for the test, stopped at its end.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := kubescheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := env.AddUser(envtest.User{Name: "test-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &testCluster{cfg: cfg, c: c, kubeconfig: path}
}

// namespaces creates namespaces (an existing one is fine).
func (tc *testCluster) namespaces(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		err := tc.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// apply creates or updates objs (server-side apply as the test).
func (tc *testCluster) apply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := tc.c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.ForceOwnership, client.FieldOwner("emaildata-test")); err != nil {
			t.Fatalf("apply %s: %v", key(o), err)
		}
	}
}

// kubectl runs kubectl against the cluster; it returns its output and error.
func (tc *testCluster) kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is needed")
	}
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", tc.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// serviceAccountUser is the user name a service account authenticates as.
func serviceAccountUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// access is one request whose authorization a test asks about.
type access struct {
	user                             string
	verb, group, resource, namespace string
	name                             string
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.group != "" {
		s += "." + a.group
	}
	if a.name != "" {
		s += "/" + a.name
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	} else {
		s += " cluster-wide"
	}
	return s + " as " + a.user
}

// allowed asks the API server (a SubjectAccessReview, what `kubectl auth
// can-i --as` asks) whether a is authorized.
func (tc *testCluster) allowed(t *testing.T, a access) bool {
	t.Helper()
	res, sub, _ := strings.Cut(a.resource, "/")
	ns, _, _ := strings.Cut(strings.TrimPrefix(a.user, "system:serviceaccount:"), ":")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   a.user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: res, Subresource: sub, Name: a.name,
		},
	}}
	if err := tc.c.Create(context.Background(), sar); err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	return sar.Status.Allowed
}

// canI asks `kubectl auth can-i` the question a; its answer must be yes
// or no.
func (tc *testCluster) canI(t *testing.T, a access) bool {
	t.Helper()
	what := a.resource
	if a.group != "" {
		what += "." + a.group
	}
	if a.name != "" {
		what += "/" + a.name
	}
	args := []string{"auth", "can-i", a.verb, what, "--as", a.user}
	if a.namespace != "" {
		args = append(args, "-n", a.namespace)
	} else {
		args = append(args, "--all-namespaces")
	}
	out, err := tc.kubectl(t, args...)
	if i := strings.LastIndex(out, "\n"); i >= 0 {
		out = out[i+1:] // after any warning
	}
	switch {
	case out == "yes" && err == nil:
		return true
	case strings.HasPrefix(out, "no"):
		return false
	}
	t.Fatalf("kubectl %v: %q %v", args, out, err)
	return false
}
