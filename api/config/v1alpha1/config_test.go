package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDefaultsAreValid(t *testing.T) {
	if errs := Validate(Default()); len(errs) > 0 {
		t.Fatalf("the defaults are invalid: %v", errs.ToAggregate())
	}
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		wantErr []string // each must appear in the error
		check   func(*Configuration) string
	}{
		{name: "empty keeps the defaults", doc: "",
			check: func(c *Configuration) string {
				if c.Verification.SMTP.HELOName != Default().Verification.SMTP.HELOName || !c.API.Console.Enabled {
					return "defaults lost"
				}
				return ""
			}},
		{name: "units people write", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"verification:\n  smtp:\n    connectTimeout: 30s\n  history:\n    ttls:\n      catchAll: 0s\n" +
			"executor:\n  jobs:\n    resources:\n      memory: 512Mi\napi:\n  console:\n    enabled: false\n",
			check: func(c *Configuration) string {
				switch {
				case c.Verification.SMTP.ConnectTimeout.Duration != 30*time.Second:
					return "connectTimeout"
				case c.Verification.History.TTLs.CatchAll.Duration != 0:
					return "a written zero must stay zero"
				case c.Executor.Jobs.Resources.Memory.Value() != 512<<20:
					return "memory"
				case c.API.Console.Enabled:
					return "console.enabled: false ignored"
				case c.Verification.SMTP.GreetingTimeout != Default().Verification.SMTP.GreetingTimeout:
					return "an unwritten sibling lost its default"
				}
				return ""
			}},
		{name: "misspelt keys name path and line", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"verification:\n  smtp:\n    heloNmae: mx.example.com\napi:\n  rateLimt: {}\n",
			wantErr: []string{`line 5: unknown field "verification.smtp.heloNmae" (did you mean "heloName"?)`, `line 7: unknown field "api.rateLimt"`}},
		{name: "every invalid value with its path", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"executor:\n  mode: cron\nverification:\n  smtp:\n    port: 0\n  history:\n    scope: everyone\n",
			wantErr: []string{"executor.mode", "verification.smtp.port", "verification.history.scope"}},
		{name: "a password in a URL is refused", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"fleet:\n  url: redis://:hunter2@redis:6379/0\n",
			wantErr: []string{"fleet.url", "$FLEET_URL"}},
		{name: "a resolver by name", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nverification:\n  dns:\n    server: resolver.internal:53\n",
			check: func(c *Configuration) string {
				if c.Verification.DNS.Server != "resolver.internal:53" {
					return "dns.server"
				}
				return ""
			}},
		{name: "a resolver without port", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nverification:\n  dns:\n    server: 10.0.0.10\n",
			wantErr: []string{"verification.dns.server"}},
		{name: "bad duration", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nfleet:\n  leaseTTL: soon\n",
			wantErr: []string{"soon"}},
		{name: "sleeping sessions unwritten: the engine's half of maxSessions", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"verification:\n  smtp:\n    maxSessions: 100\n",
			check: func(c *Configuration) string {
				if n := c.Verification.SMTP.MaxSleepingSessions; n != 0 {
					return fmt.Sprintf("maxSleepingSessions %d, want 0 (smtpprobe.SleepingSessions of maxSessions)", n)
				}
				return ""
			}},
		{name: "no sleeping sessions: maxSessions caps every connection", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"verification:\n  smtp:\n    maxSleepingSessions: -1\n",
			check: func(c *Configuration) string {
				if n := c.Verification.SMTP.MaxSleepingSessions; n != -1 {
					return fmt.Sprintf("maxSleepingSessions %d, want -1", n)
				}
				return ""
			}},
		{name: "sleeping sessions below -1", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
			"verification:\n  smtp:\n    maxSleepingSessions: -2\n",
			wantErr: []string{"verification.smtp.maxSleepingSessions", "-1 for none"}},
		{name: "wrong kind", doc: "apiVersion: config.emaildata.io/v1alpha1\nkind: Something\n", wantErr: []string{"kind"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.doc))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(c); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestMarshalRedactsAndRoundTrips(t *testing.T) {
	c := Default()
	c.Fleet.URL = "redis://:hunter2@redis:6379/0"
	c.Verification.Proxies.URLs = []string{"socks5://u:pw@proxy:1080"}
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") || strings.Contains(string(out), ":pw@") {
		t.Fatalf("a password printed:\n%s", out)
	}
	if c.Fleet.URL != "redis://:hunter2@redis:6379/0" || c.Verification.Proxies.URLs[0] != "socks5://u:pw@proxy:1080" {
		t.Fatal("Redacted changed its argument")
	}
	// A printed configuration without secrets loads back as the same.
	c.Fleet.URL, c.Verification.Proxies.URLs = "redis://redis:6379/0", nil
	if out, err = Marshal(c); err != nil {
		t.Fatal(err)
	}
	d, err := Decode(out)
	if err != nil {
		t.Fatalf("printed configuration does not load: %v\n%s", err, out)
	}
	if d.Verification.SMTP.HELOName != c.Verification.SMTP.HELOName || d.Executor.Jobs.Resources.Memory.Cmp(c.Executor.Jobs.Resources.Memory) != 0 {
		t.Error("round trip changed values")
	}
}

// TestShippedFilesDecode: the configuration files the repository ships
// load with the binaries' strict loader.
func TestShippedFilesDecode(t *testing.T) {
	for _, path := range []string{"../../../hack/localstack/configuration.yaml", "../../../hack/localstack/online.yaml"} {
		if _, err := Load(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestParseQuantity(t *testing.T) {
	cases := []struct {
		in    string
		value int64
		bad   bool
	}{
		{in: "256Mi", value: 256 << 20}, {in: "1Gi", value: 1 << 30}, {in: "1.5Gi", value: 3 << 29},
		{in: "100k", value: 100_000}, {in: "1024", value: 1024}, {in: "500m", value: 1}, {in: "2", value: 2},
		{in: "8Mi", value: 8 << 20}, {in: "", bad: true}, {in: "12 MB", bad: true}, {in: "Mi", bad: true}, {in: "1x", bad: true},
	}
	for _, tc := range cases {
		q, err := ParseQuantity(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
			continue
		}
		if err != nil || q.Value() != tc.value {
			t.Errorf("%q: %d, %v; want %d", tc.in, q.Value(), err, tc.value)
		}
	}
	if MustParseQuantity("500m").Cmp(MustParseQuantity("1")) >= 0 || Bytes(8<<20).String() != "8Mi" || Bytes(1000).String() != "1000" {
		t.Error("Cmp or Bytes")
	}
}
