package operator

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseNodeSelector(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  string
	}{
		{"", nil, ""},
		{"pool=batch", map[string]string{"pool": "batch"}, ""},
		{" pool=batch, kubernetes.io/arch=amd64 ", map[string]string{"pool": "batch", "kubernetes.io/arch": "amd64"}, ""},
		{"pool", nil, "want key=value"},
		{"bad key=x", nil, "key"},
		{"pool=no spaces", nil, "value"},
	} {
		got, err := ParseNodeSelector(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseTolerations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []corev1.Toleration
		err  string
	}{
		{"", nil, ""},
		{"dedicated=batch:NoSchedule", []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}, ""},
		{"spot:NoExecute,gpu", []corev1.Toleration{
			{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			{Key: "gpu", Operator: corev1.TolerationOpExists}}, ""},
		{"dedicated=batch", []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch"}}, ""},
		{"*", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, ""},
		{"a=b:Sometimes", nil, "effect"},
		{"=b:NoSchedule", nil, "key"},
	} {
		got, err := ParseTolerations(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestWorkerResources(t *testing.T) {
	r, err := WorkerResources("500m", "256Mi", "")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Requests.Cpu().Equal(resource.MustParse("500m")) || !r.Limits.Memory().Equal(resource.MustParse("256Mi")) || !r.Limits.Cpu().IsZero() {
		t.Errorf("resources %+v", r)
	}
	r, err = WorkerResources("500m", "256Mi", "2")
	if err != nil || !r.Limits.Cpu().Equal(resource.MustParse("2")) {
		t.Errorf("cpu limit: %+v %v", r, err)
	}
	for _, bad := range [][3]string{{"lots", "1Gi", ""}, {"1", "1Gi", "500m"}} {
		if _, err := WorkerResources(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestParsePullPolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want corev1.PullPolicy
		err  bool
	}{
		{"Always", corev1.PullAlways, false},
		{"IfNotPresent", corev1.PullIfNotPresent, false},
		{"Never", corev1.PullNever, false},
		{"", "", true},
		{"always", "", true}, // the API server's spelling only
		{"IfNotPresent ", "", true},
	} {
		got, err := ParsePullPolicy(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%q: %q, %v; want %q (error: %v)", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "want Always, IfNotPresent or Never") {
			t.Errorf("%q: error %q does not say what is allowed", tc.in, err)
		}
	}
}
