package deploy

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestPodSecurityRestricted creates (dry run) a pod from each Deployment
// the chart renders, for every value set and for the OpenShift example,
// in a namespace that enforces Pod Security "restricted", against a real
// kube-apiserver: its PodSecurity admission admits them all. A control
// whose container may escalate privileges is refused first, so the
// admission is known to be on and to know the namespace's label. (The worker pods the manager builds are admitted under
// the same label in controllers' TestJobPathActiveDeadline.)
func TestPodSecurityRestricted(t *testing.T) {
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
	_ = corev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}); err != nil {
		t.Fatal(err)
	}
	// The control first, until it is refused: from then on the namespace's
	// label is known to the admission, and an admitted pod passed it.
	escalating := renderChart(t, map[string]any{"containerSecurityContext": map[string]any{"allowPrivilegeEscalation": true}})
	deadline := time.Now().Add(30 * time.Second)
	var errs []error
	for errs = dryRunPods(ctx, t, c, escalating); len(errs) == 0 && time.Now().Before(deadline); errs = dryRunPods(ctx, t, c, escalating) {
		time.Sleep(100 * time.Millisecond)
	}
	if len(errs) != 2 {
		t.Fatalf("control: %d pods refused, want the manager's and the API's: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			t.Errorf("control refused with %v, want a PodSecurity violation", err)
		}
	}

	sets := append(slices.Clone(valueSets), struct {
		name string
		vals map[string]any
	}{"OpenShift example", openShiftValues()})
	for _, vs := range sets {
		t.Run(vs.name, func(t *testing.T) {
			for _, err := range dryRunPods(ctx, t, c, renderChart(t, vs.vals)) {
				t.Error(err)
			}
		})
	}
}

// dryRunPods creates a pod of each rendered Deployment's template with
// dryRun=All (its service account created for real first, as the
// ServiceAccount admission may look it up) and returns the refusals.
func dryRunPods(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) []error {
	t.Helper()
	var errs []error
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := deployment(t, objs, o.GetName())
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: d.Spec.Template.Spec.ServiceAccountName}}
		if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: d.Name, Labels: d.Spec.Template.Labels},
			Spec: d.Spec.Template.Spec}
		if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
