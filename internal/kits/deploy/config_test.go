package deploy

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// chartConfig is the Configuration the chart renders (the ConfigMap
// <fullname>-config), decoded with the binaries' own strict loader.
func chartConfig(t *testing.T, objs []*unstructured.Unstructured, fullname string) *cfgv1.Configuration {
	t.Helper()
	cm := find(t, objs, "ConfigMap", fullname+"-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	c, err := cfgv1.Decode([]byte(data))
	if err != nil {
		t.Fatalf("the chart's configuration does not load: %v\n%s", err, data)
	}
	return c
}

// renderedConfig is the Configuration among objs (the one ConfigMap with
// a config.yaml), whatever the release's name.
func renderedConfig(t *testing.T, objs []*unstructured.Unstructured) *cfgv1.Configuration {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		if data, ok, _ := unstructured.NestedString(o.Object, "data", "config.yaml"); ok {
			c, err := cfgv1.Decode([]byte(data))
			if err != nil {
				t.Fatalf("%s: %v", o.GetName(), err)
			}
			return c
		}
	}
	t.Fatal("no configuration rendered")
	return nil
}

// TestChartConfiguration: representative values render one Configuration
// the binaries load, which both Deployments mount and name with --config,
// holding what the values say (the chart's derived settings, with the
// config block winning over them).
func TestChartConfiguration(t *testing.T) {
	custom := customValues()
	custom["config"] = map[string]any{
		"verification": map[string]any{
			"smtp":    map[string]any{"heloName": "verify.example.com", "maxConnsPerHost": 3},
			"history": map[string]any{"scope": "shared", "ttls": map[string]any{"deliverable": "720h"}},
		},
		"pipeline": map[string]any{"limits": map[string]any{"maxExpandedBytes": "3Gi", "maxRecordBytes": 65536, "maxExpansionRatio": 50}},
		"executor": map[string]any{"jobs": map[string]any{"parallelism": 16, "priorityClassName": "from-config"}},
		"api":      map[string]any{"throttle": map[string]any{"trustedProxies": []any{"10.0.0.0/8"}}},
	}
	for _, tc := range []struct {
		name  string
		vals  map[string]any
		check func(t *testing.T, c *cfgv1.Configuration)
	}{
		{"defaults", nil, func(t *testing.T, c *cfgv1.Configuration) {
			want := cfgv1.Default()
			if c.Store.URL != "file:///var/lib/emaildata/store" || c.Store.PVC != "emaildata-store" || c.Executor.Mode != "job" {
				t.Errorf("store %+v executor %q", c.Store, c.Executor.Mode)
			}
			if c.Executor.Jobs.ServiceAccountName != "emaildata-worker" || c.Executor.Jobs.ImagePullPolicy != "IfNotPresent" {
				t.Errorf("jobs %+v", c.Executor.Jobs)
			}
			if c.Verification.SMTP.HELOName != want.Verification.SMTP.HELOName || c.Verification.History.Scope != want.Verification.History.Scope {
				t.Errorf("engine defaults changed: %+v", c.Verification.SMTP)
			}
		}},
		{"custom", custom, func(t *testing.T, c *cfgv1.Configuration) {
			j := c.Executor.Jobs
			if c.Store.URL != "s3://lists?region=eu-west-1" || c.Store.PVC != "" || j.EnvFromSecret != "store-creds" {
				t.Errorf("store %+v env %q", c.Store, j.EnvFromSecret)
			}
			if j.Resources.CPU.String() != "750m" || j.Resources.Memory.String() != "384Mi" || j.Resources.CPULimit.String() != "2" {
				t.Errorf("resources %+v", j.Resources)
			}
			if j.NodeSelector["pool"] != "batch" || len(j.Tolerations) != 2 || j.Tolerations[1].Operator != "Exists" {
				t.Errorf("placement %v %+v", j.NodeSelector, j.Tolerations)
			}
			if j.PriorityClassName != "from-config" || j.Parallelism != 16 {
				t.Errorf("config must win over worker.*: %q %d", j.PriorityClassName, j.Parallelism)
			}
			v := c.Verification
			if v.SMTP.HELOName != "verify.example.com" || v.SMTP.MaxConnsPerHost != 3 || v.History.Scope != "shared" ||
				v.History.TTLs.Deliverable.Duration != 720*time.Hour {
				t.Errorf("verification %+v %+v", v.SMTP, v.History)
			}
			l := c.Pipeline.Limits
			if l.MaxExpandedBytes.Value() != 3<<30 || l.MaxRecordBytes.Value() != 65536 || l.MaxExpansionRatio != 50 {
				t.Errorf("limits %+v", l)
			}
			if len(c.API.Throttle.TrustedProxies) != 1 {
				t.Errorf("throttle %+v", c.API.Throttle)
			}
		}},
		{"namespaced, keys apart, metrics certificate", map[string]any{
			"watchNamespaces": []any{"team-a", "team-b", "team-a"},
			"apiKeys":         map[string]any{"namespace": "emaildata-keys"},
			"metrics":         map[string]any{"certSecret": "metrics-tls"},
			"executor":        "local",
		}, func(t *testing.T, c *cfgv1.Configuration) {
			n := c.Namespaces
			if strings.Join(n.Watch, ",") != "team-a,team-b" || n.APIKeys != "emaildata-keys" {
				t.Errorf("namespaces %+v", n)
			}
			if c.Metrics.CertDir != "/etc/emaildata/metrics-tls" || c.Executor.Mode != "local" {
				t.Errorf("metrics %+v executor %q", c.Metrics, c.Executor.Mode)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderChart(t, tc.vals)
			tc.check(t, chartConfig(t, objs, "emaildata"))
			for _, d := range []string{"emaildata-controller-manager", "emaildata-api"} {
				checkMountsConfig(t, deployment(t, objs, d))
			}
		})
	}
}

// checkMountsConfig: the Deployment mounts the configuration and passes
// it with --config, and its pods roll when it changes.
func checkMountsConfig(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	args, checksum := c.Args, d.Spec.Template.Annotations["checksum/config"]
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.Name+"="+m.MountPath)
	}
	if p, _ := argValue(args, "--config"); p != "/etc/emaildata/config/config.yaml" {
		t.Errorf("--config=%q in %v", p, args)
	}
	if !strings.Contains(strings.Join(mounts, ","), "config=/etc/emaildata/config") {
		t.Errorf("config not mounted: %v", mounts)
	}
	if len(checksum) != 64 {
		t.Errorf("checksum/config %q", checksum)
	}
}

// TestChartConfigRefusesTypos: a key the Configuration does not have, a
// value of the wrong kind, or a misspelt value of the chart's own, at any
// depth, fails rendering with its path (values.schema.json); a value
// moved into config names its new home.
func TestChartConfigRefusesTypos(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"misspelt key", map[string]any{"config": map[string]any{"verification": map[string]any{"smtp": map[string]any{"heloNmae": "x"}}}},
			[]string{"/config/verification/smtp", "heloNmae"}},
		{"unknown section", map[string]any{"config": map[string]any{"verifcation": map[string]any{}}}, []string{"/config", "verifcation"}},
		{"wrong kind", map[string]any{"config": map[string]any{"verification": map[string]any{"smtp": map[string]any{"maxConnsPerHost": "many"}}}},
			[]string{"/config/verification/smtp/maxConnsPerHost"}},
		{"bad duration", map[string]any{"config": map[string]any{"fleet": map[string]any{"leaseTTL": "ten seconds"}}}, []string{"/config/fleet/leaseTTL"}},
		{"misspelt top-level value", map[string]any{"wokrer": map[string]any{}}, []string{"wokrer"}},
		// The chart's own values, outside config, are held to their shape too.
		{"misspelt nested value", map[string]any{"manager": map[string]any{"replica": 2}}, []string{"/manager", "replica"}},
		{"misspelt deeper value", map[string]any{"store": map[string]any{"pvc": map[string]any{"storageClass": "fast"}}}, []string{"/store/pvc", "storageClass"}},
		{"wrong type of a value", map[string]any{"api": map[string]any{"replicas": "two"}}, []string{"/api/replicas", "integer"}},
		{"wrong type of a flag value", map[string]any{"manager": map[string]any{"leaderElect": "yes"}}, []string{"/manager/leaderElect", "boolean"}},
		{"value outside its enum", map[string]any{"executor": "jobs"}, []string{"/executor"}},
		{"extraArgs not a list", map[string]any{"api": map[string]any{"extraArgs": "--listen=:8080"}}, []string{"/api/extraArgs", "array"}},
		{"listLimits moved", map[string]any{"listLimits": map[string]any{"maxRecordBytes": 10}}, []string{"config.pipeline.limits"}},
		{"history.scope moved", map[string]any{"history": map[string]any{"scope": "shared"}}, []string{"config.verification.history.scope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChartErr(tc.vals)
			if err == nil {
				t.Fatal("rendered")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
