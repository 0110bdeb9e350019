package deploy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/operator"
)

const (
	digestA = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	digestB = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// openShiftValues are the values docs/operations.md gives for OpenShift's
// restricted-v2 SCC: no user, group or fsGroup named.
func openShiftValues() map[string]any {
	return map[string]any{"podSecurityContext": map[string]any{"runAsUser": nil, "runAsGroup": nil, "fsGroup": nil}}
}

// managerAndAPI renders vals and returns the two Deployments' containers
// and the manager's worker image (its WORKER_IMAGE, passed as --worker-image).
func managerAndAPI(t *testing.T, vals map[string]any) (mgr, api corev1.Container, workerImage string) {
	t.Helper()
	objs := renderChart(t, vals)
	mgr = deployment(t, objs, "emaildata-controller-manager").Spec.Template.Spec.Containers[0]
	api = deployment(t, objs, "emaildata-api").Spec.Template.Spec.Containers[0]
	for _, e := range mgr.Env {
		if e.Name == "WORKER_IMAGE" {
			workerImage = e.Value
		}
	}
	return mgr, api, workerImage
}

// TestChartImageDigest: image.digest pins the manager, the API and the
// workers to repository@digest, over the tag; worker.image's digest or tag
// wins for the workers, and a worker repository of its own never takes
// image's digest (it names another image). A malformed digest is refused
// at render time, naming the value.
func TestChartImageDigest(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		image, worker        map[string]any
		wantImage, wantWorkr string
	}{
		{"tag only", nil, nil, "emaildata:dev", "emaildata:dev"},
		{"digest over tag", map[string]any{"repository": "reg.example/ed", "tag": "1.2.3", "digest": digestA}, nil,
			"reg.example/ed@" + digestA, "reg.example/ed@" + digestA},
		{"worker digest", map[string]any{"digest": digestA}, map[string]any{"digest": digestB},
			"emaildata@" + digestA, "emaildata@" + digestB},
		{"worker tag over image digest", map[string]any{"digest": digestA}, map[string]any{"tag": "w1"},
			"emaildata@" + digestA, "emaildata:w1"},
		{"worker repository takes image's tag, not its digest", map[string]any{"tag": "1.2.3", "digest": digestA},
			map[string]any{"repository": "reg.example/worker"}, "emaildata@" + digestA, "reg.example/worker:1.2.3"},
		{"worker repository and digest", nil, map[string]any{"repository": "reg.example/worker", "digest": digestB},
			"emaildata:dev", "reg.example/worker@" + digestB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{}
			if tc.image != nil {
				vals["image"] = tc.image
			}
			if tc.worker != nil {
				vals["worker"] = map[string]any{"image": tc.worker}
			}
			mgr, api, worker := managerAndAPI(t, vals)
			if mgr.Image != tc.wantImage || api.Image != tc.wantImage || worker != tc.wantWorkr {
				t.Errorf("manager %s, API %s, workers %s; want %s and workers %s", mgr.Image, api.Image, worker, tc.wantImage, tc.wantWorkr)
			}
		})
	}
	for _, bad := range []struct{ vals map[string]any }{
		{map[string]any{"image": map[string]any{"digest": "0123abcd"}}},
		{map[string]any{"image": map[string]any{"digest": "@" + digestA}}},
		{map[string]any{"worker": map[string]any{"image": map[string]any{"digest": "sha256:ABC"}}}},
	} {
		_, err := renderChartErr(bad.vals)
		if err == nil || !strings.Contains(err.Error(), "is not a digest: want sha256:<64 lowercase hex digits>") || !strings.Contains(err.Error(), "digest") {
			t.Errorf("%v: error %v, want the digest refused with its form", bad.vals, err)
		}
	}
}

// TestChartWorkerPullPolicy: the workers are pulled as image.pullPolicy
// says unless worker.image.pullPolicy does, through the manager's flag,
// read back with the manager's own parser; a policy the API server would
// refuse is refused at render time.
func TestChartWorkerPullPolicy(t *testing.T) {
	for _, tc := range []struct {
		image, worker string
		want          corev1.PullPolicy
	}{
		{"", "", corev1.PullIfNotPresent},
		{"Always", "", corev1.PullAlways},
		{"Always", "Never", corev1.PullNever},
	} {
		vals := map[string]any{}
		if tc.image != "" {
			vals["image"] = map[string]any{"pullPolicy": tc.image}
		}
		if tc.worker != "" {
			vals["worker"] = map[string]any{"image": map[string]any{"pullPolicy": tc.worker}}
		}
		mgr, api, _ := managerAndAPI(t, vals)
		flag := chartConfig(t, renderChart(t, vals), "emaildata").Executor.Jobs.ImagePullPolicy
		got, err := operator.ParsePullPolicy(flag)
		if err != nil || got != tc.want {
			t.Errorf("image %q worker %q: executor.jobs.imagePullPolicy %q (%v), want %s", tc.image, tc.worker, flag, err, tc.want)
		}
		if tc.image != "" && (string(mgr.ImagePullPolicy) != tc.image || string(api.ImagePullPolicy) != tc.image) {
			t.Errorf("image %q: manager pulls %s, API %s", tc.image, mgr.ImagePullPolicy, api.ImagePullPolicy)
		}
	}
	_, err := renderChartErr(map[string]any{"worker": map[string]any{"image": map[string]any{"pullPolicy": "always"}}})
	if err == nil || !strings.Contains(err.Error(), "/worker/image/pullPolicy") {
		t.Errorf("pull policy always: error %v, want it refused", err)
	}
}

// TestChartWorkerActiveDeadline: worker.activeDeadline becomes the
// configuration's executor.jobs.activeDeadline, a Go duration (controllers' envtest
// TestJobPathActiveDeadline follows it from the manager's setting to the
// Job and the list's condition); unset, the configuration's default
// holds; a value the manager could not parse is refused at render time,
// by values.schema.json, with its path.
func TestChartWorkerActiveDeadline(t *testing.T) {
	for _, tc := range []struct {
		val  any
		want time.Duration
		set  bool
	}{
		{"", 0, false},
		{"36h", 36 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"-1s", -time.Second, true},
	} {
		if !tc.set {
			tc.want = cfgv1.Default().Executor.Jobs.ActiveDeadline.Duration
		}
		c := chartConfig(t, renderChart(t, map[string]any{"worker": map[string]any{"activeDeadline": tc.val}}), "emaildata")
		if d := c.Executor.Jobs.ActiveDeadline.Duration; d != tc.want {
			t.Errorf("activeDeadline %q: executor.jobs.activeDeadline %v, want %v", tc.val, d, tc.want)
		}
	}
	for _, bad := range []any{"1 day", "24", 86400} {
		_, err := renderChartErr(map[string]any{"worker": map[string]any{"activeDeadline": bad}})
		if err == nil || !strings.Contains(err.Error(), "/worker/activeDeadline") {
			t.Errorf("activeDeadline %v: error %v, want it refused", bad, err)
		}
	}
}

// TestChartPDB: the API's PodDisruptionBudget is rendered for more than
// one replica only: with one, minAvailable 1 would block node drains.
func TestChartPDB(t *testing.T) {
	for _, tc := range []struct {
		vals map[string]any
		want bool
	}{
		{nil, true}, // two replicas by default
		{map[string]any{"api": map[string]any{"replicas": 1}}, false},
		{map[string]any{"api": map[string]any{"replicas": 3}}, true},
		{map[string]any{"api": map[string]any{"replicas": 3}, "podDisruptionBudget": map[string]any{"enabled": false}}, false},
		{map[string]any{"api": map[string]any{"enabled": false}}, false},
	} {
		n := 0
		for _, o := range renderChart(t, tc.vals) {
			if o.GetKind() == "PodDisruptionBudget" {
				n++
			}
		}
		if (n == 1) != tc.want || n > 1 {
			t.Errorf("%v: %d PodDisruptionBudgets, want one: %v", tc.vals, n, tc.want)
		}
	}
}

// TestChartSecurityContexts: the defaults are the restricted profile's
// (TestPodSecurityRestricted has the API server admit them); values merge
// over them, and null drops a key, as the OpenShift example does.
func TestChartSecurityContexts(t *testing.T) {
	defaultPod := &corev1.PodSecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)), RunAsGroup: ptr(int64(65532)), FSGroup: ptr(int64(65532)),
		FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	defaultContainer := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	openShiftPod := defaultPod.DeepCopy()
	openShiftPod.RunAsUser, openShiftPod.RunAsGroup, openShiftPod.FSGroup = nil, nil, nil
	customPod := defaultPod.DeepCopy()
	customPod.RunAsUser, customPod.SupplementalGroups = ptr(int64(1000)), []int64{2000}
	customContainer := defaultContainer.DeepCopy()
	customContainer.RunAsNonRoot = ptr(true)
	for _, tc := range []struct {
		name      string
		vals      map[string]any
		pod       *corev1.PodSecurityContext
		container *corev1.SecurityContext
	}{
		{"defaults", nil, defaultPod, defaultContainer},
		{"OpenShift restricted-v2", openShiftValues(), openShiftPod, defaultContainer},
		{"merged", map[string]any{
			"podSecurityContext":       map[string]any{"runAsUser": 1000, "supplementalGroups": []any{2000}},
			"containerSecurityContext": map[string]any{"runAsNonRoot": true},
		}, customPod, customContainer},
	} {
		objs := renderChart(t, tc.vals)
		for _, name := range []string{"emaildata-controller-manager", "emaildata-api"} {
			spec := deployment(t, objs, name).Spec.Template.Spec
			if !reflect.DeepEqual(spec.SecurityContext, tc.pod) {
				t.Errorf("%s: %s pod securityContext %+v, want %+v", tc.name, name, spec.SecurityContext, tc.pod)
			}
			if got := spec.Containers[0].SecurityContext; !reflect.DeepEqual(got, tc.container) {
				t.Errorf("%s: %s container securityContext %+v, want %+v", tc.name, name, got, tc.container)
			}
		}
	}
}
