package operator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseNodeSelector parses "key=value,key2=value2" (empty: none).
func ParseNodeSelector(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("node selector %q: want key=value", kv)
		}
		if err := checkLabel(k, v); err != nil {
			return nil, fmt.Errorf("node selector %q: %w", kv, err)
		}
		out[k] = v
	}
	return out, nil
}

// ParseTolerations parses a comma separated list of tolerations in the
// form of kubectl taint: "key=value:Effect" (operator Equal), "key:Effect"
// or "key" (operator Exists), "key=value" (any effect); "*" tolerates every
// taint. Empty: none.
func ParseTolerations(s string) ([]corev1.Toleration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []corev1.Toleration
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "*" {
			out = append(out, corev1.Toleration{Operator: corev1.TolerationOpExists})
			continue
		}
		kv, effect, _ := strings.Cut(item, ":")
		t := corev1.Toleration{Effect: corev1.TaintEffect(effect), Operator: corev1.TolerationOpExists}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("toleration %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", item, effect)
		}
		k, v, hasValue := strings.Cut(kv, "=")
		if hasValue {
			t.Operator, t.Value = corev1.TolerationOpEqual, v
		}
		if err := checkLabel(k, v); err != nil {
			return nil, fmt.Errorf("toleration %q: %w", item, err)
		}
		t.Key = k
		out = append(out, t)
	}
	return out, nil
}

func checkLabel(k, v string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", k, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return fmt.Errorf("value %q: %s", v, strings.Join(errs, "; "))
	}
	return nil
}

// DefaultWorkerMemory is a worker pod's memory request and limit unless
// --worker-memory says otherwise; the local stack's test node enforces it.
const DefaultWorkerMemory = "256Mi"

// WorkerResources are the worker container's resources: cpu and memory
// requested, memory also the limit (a worker's memory is flat), and cpu
// limited only when cpuLimit is set.
func WorkerResources(cpu, memory, cpuLimit string) (corev1.ResourceRequirements, error) {
	q := map[string]resource.Quantity{}
	for name, v := range map[string]string{"cpu": cpu, "memory": memory, "cpu limit": cpuLimit} {
		if v == "" {
			continue
		}
		parsed, err := resource.ParseQuantity(v)
		if err != nil {
			return corev1.ResourceRequirements{}, fmt.Errorf("worker %s %q: %w", name, v, err)
		}
		q[name] = parsed
	}
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if v, ok := q["cpu"]; ok {
		r.Requests[corev1.ResourceCPU] = v
	}
	if v, ok := q["memory"]; ok {
		r.Requests[corev1.ResourceMemory] = v
		r.Limits[corev1.ResourceMemory] = v
	}
	if v, ok := q["cpu limit"]; ok {
		if req, ok := q["cpu"]; ok && v.Cmp(req) < 0 {
			return corev1.ResourceRequirements{}, fmt.Errorf("worker cpu limit %s is below the cpu request %s", cpuLimit, cpu)
		}
		r.Limits[corev1.ResourceCPU] = v
	}
	return r, nil
}

// ParsePullPolicy parses an imagePullPolicy: Always, IfNotPresent or Never
// (as the API server spells them; anything else would be refused there, at
// each Job's creation).
func ParsePullPolicy(s string) (corev1.PullPolicy, error) {
	switch p := corev1.PullPolicy(s); p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return p, nil
	}
	return "", fmt.Errorf("image pull policy %q: want Always, IfNotPresent or Never", s)
}
