package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// get is the value at a dotted path of doc (nil when missing).
func get(doc map[string]any, path string) any {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

var testSettings = settings{concurrency: 32, port: 2525, greylistRetry: 5 * time.Second}

// TestEngineConfig: the tool's settings for the world, -config's and
// -set's over them, and the world's own address and range whatever they
// say.
func TestEngineConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n"+
		"verification:\n  dns:\n    server: 8.8.8.8:53\n  smtp:\n    ratePerHost: 20\n    maxSessions: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		file  string
		sets  []string
		fleet string
		extra map[string]any
		want  map[string]any
	}{
		{name: "the tool's settings", want: map[string]any{
			"verification.dns.server": "127.0.0.1:5300", "verification.smtp.port": 2525, "verification.smtp.maxSessions": 32,
			"verification.dns.workers": 32, "verification.smtp.greylistRetry": "5s", "verification.history.url": "off",
			"verification.smtp.enabled": true, "kind": "Configuration"}},
		{name: "with a fleet, its history", fleet: "redis://127.0.0.1:6379/0?prefix=x:", want: map[string]any{
			"fleet.url": "redis://127.0.0.1:6379/0?prefix=x:", "verification.history": nil}},
		{name: "-set over the tool's", sets: []string{"verification.dns.timeout=10s", "verification.smtp.maxSessions=64"},
			want: map[string]any{"verification.dns.timeout": "10s", "verification.smtp.maxSessions": 64,
				"verification.dns.server": "127.0.0.1:5300"}},
		{name: "-config over the tool's, -set over -config; the world's server stays", file: file,
			sets: []string{"verification.smtp.maxSessions=9"},
			want: map[string]any{"verification.smtp.ratePerHost": 20, "verification.smtp.maxSessions": 9,
				"verification.dns.server": "127.0.0.1:5300", "verification.smtp.heloName": "verify.test"}},
		{name: "the stack's own keys", extra: map[string]any{"pipeline": map[string]any{"maxShards": 8}},
			sets: []string{"pipeline.shardBy=domain"},
			want: map[string]any{"pipeline.maxShards": 8, "pipeline.shardBy": "domain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := userConfig(tc.file, tc.sets)
			if err != nil {
				t.Fatal(err)
			}
			s := testSettings
			s.conf, s.fleetURL = conf, tc.fleet
			out, err := engineConfig("127.0.0.1:5300", s, tc.extra)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.want {
				if got := get(doc, path); got != want {
					t.Errorf("%s = %#v, want %#v\n%s", path, got, want, out)
				}
			}
			// The user's document is not changed by a run's.
			if again, _ := engineConfig("127.0.0.1:5300", s, tc.extra); string(again) != string(out) {
				t.Errorf("a second configuration differs:\n%s\n%s", out, again)
			}
		})
	}
}

// TestUserConfigErrors: a -set without a value, over a scalar, or a file
// of another kind is refused with what is wrong.
func TestUserConfigErrors(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		sets []string
		want string
	}{
		{sets: []string{"verification.dns.timeout"}, want: "want key.path=value"},
		{sets: []string{"fleet=x", "fleet.url=y"}, want: "fleet is not a map"},
		{file: other, want: "want config.emaildata.io/v1alpha1 Configuration"},
	} {
		if _, err := userConfig(tc.file, tc.sets); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: err = %v, want %q", tc.file, tc.sets, err, tc.want)
		}
	}
}

// TestEngineConfigLoads: what the tool writes loads with the strict
// loader of worker run and of the local stack (their --print-config), and
// a misspelt -set key is refused with its path.
func TestEngineConfigLoads(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/worker", "./hack/localstack")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name, prog string
		sets       []string
		stack      bool
		want       string // in the output; "" with fail
		fail       string // in the error output
	}{
		{name: "worker run", prog: "worker", sets: []string{"verification.dns.timeout=10s"}, want: "timeout: 10s"},
		{name: "the local stack", prog: "localstack", stack: true, sets: []string{"pipeline.shardBy=domain"}, want: "shardBy: domain"},
		{name: "a misspelt key", prog: "worker", sets: []string{"verification.dns.timout=10s"}, fail: "verification.dns.timout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := userConfig("", tc.sets)
			if err != nil {
				t.Fatal(err)
			}
			s := testSettings
			s.conf = conf
			var data []byte
			if tc.stack {
				data, err = stackConfig("127.0.0.1:5300", s, jobsSettings{shards: 8})
			} else {
				data, err = engineConfig("127.0.0.1:5300", s, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--config", file, "--print-config"}
			if tc.prog == "worker" {
				args = append([]string{"run"}, args...)
			}
			cmd := exec.Command(filepath.Join(bin, tc.prog), args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			out, err := cmd.CombinedOutput()
			switch {
			case tc.fail != "":
				if err == nil || !strings.Contains(string(out), tc.fail) {
					t.Errorf("err %v, output:\n%s\nwant a refusal naming %s", err, out, tc.fail)
				}
			case err != nil:
				t.Fatalf("%v:\n%s\nfrom:\n%s", err, out, data)
			default:
				for _, want := range []string{tc.want, "server: 127.0.0.1:5300"} {
					if !strings.Contains(string(out), want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
			}
		})
	}
}
