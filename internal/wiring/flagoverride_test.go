package wiring

import (
	"flag"
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestApplyFlags: the flags given land in the fields the migration table
// names, so --print-config shows what the process runs with.
func TestApplyFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		check   func(*cfgv1.Configuration) bool
		wantErr bool
		skipped int
	}{
		{name: "a string", args: []string{"--blob-url", "s3://bucket"},
			check: func(c *cfgv1.Configuration) bool { return c.Store.URL == "s3://bucket" }},
		{name: "a Secret's name", args: []string{"--history-key-secret=vault-history"},
			check: func(c *cfgv1.Configuration) bool { return c.Installation.Secrets["history-key"] == "vault-history" }},
		{name: "the log level as the file spells it", args: []string{"--log-level=DEBUG", "--log-format=text"},
			check: func(c *cfgv1.Configuration) bool { return c.Logging.Level == "debug" && c.Logging.Format == "text" }},
		{name: "a value the configuration refuses", args: []string{"--log-format=xml"}, wantErr: true},
		{name: "flags without a field are reported", args: []string{"--listen=:9999", "--config=x.yaml"}, skipped: 1,
			check: func(c *cfgv1.Configuration) bool { return true }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfgv1.Default()
			fs := processFlagSet(c)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			skipped, err := ApplyFlags(c, fs)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(skipped) != tc.skipped {
				t.Errorf("skipped %v, want %d", skipped, tc.skipped)
			}
			if !tc.check(c) {
				t.Errorf("%v not applied", tc.args)
			}
		})
	}
}

// processFlagSet binds the flags a process binds (the API's): its own,
// --blob-url, the logging flags and the Secret names.
func processFlagSet(c *cfgv1.Configuration) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("config", "", "")
	fs.Bool("print-config", false, "")
	fs.String("listen", ":8090", "")
	fs.String("metrics-bind-address", ":8091", "")
	fs.String("blob-url", "", "")
	lo := LoggingFrom(c)
	lo.BindFlags(fs, lo)
	secrets := SecretsFrom(c)
	secrets.BindFlags(fs)
	return fs
}

// TestPrintConfig: --print-config shows every value the process runs
// with: the flags that are settings written into the file's fields (a
// Secret's name, the log level as the file spells it), the process's own
// flags with their values in a comment block, given or default, passwords
// redacted; and the output loads again as a --config file (but for a URL
// with a password, which the loader refuses in a file).
func TestPrintConfig(t *testing.T) {
	c := cfgv1.Default()
	fs := processFlagSet(c)
	if err := fs.Parse([]string{"--listen=:9999", "--log-level=debug", "--history-key-secret=vault-history",
		"--blob-url=s3://key:s3cret@bucket"}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code := PrintConfig(&out, c, fs); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"#   --listen=:9999 (given)\n", "#   --metrics-bind-address=:8091 (default)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "s3cret") || strings.Contains(out.String(), "--history-key-secret") {
		t.Errorf("a password, or a setting as a flag, in the output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "url: s3://key:xxxxx@bucket\n") {
		t.Errorf("the store URL is not shown redacted:\n%s", out.String())
	}
	// A URL with a password, even redacted, is refused by the loader (it
	// belongs in a Secret): the rest loads.
	got, err := cfgv1.Decode([]byte(strings.Replace(out.String(), "s3://key:xxxxx@bucket", "s3://bucket", 1)))
	if err != nil {
		t.Fatalf("the output does not load: %v\n%s", err, out.String())
	}
	if got.Logging.Level != "debug" || got.Installation.Secrets["history-key"] != "vault-history" ||
		got.Store.URL != "s3://bucket" {
		t.Errorf("level %q secrets %v store %q", got.Logging.Level, got.Installation.Secrets, got.Store.URL)
	}
}

// TestJobEnvComment: `worker shard --print-config` shows the per-list
// environment of its Job, set or unset, as comments (the output still
// loads as a file).
func TestJobEnvComment(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{name: "a Job's pod", env: map[string]string{"JOB_COMPLETION_INDEX": "3", EnvFleetSeats: "8", EnvSMTPConns: "1", EnvSMTPRate: "0.25"},
			want: []string{"#   $JOB_COMPLETION_INDEX=3 ", "#   $EMAILDATA_FLEET_SEATS=8 ", "#   $EMAILDATA_FLEET_REQUIRED=(unset) ",
				"#   $EMAILDATA_SMTP_MAX_CONNS_PER_HOST=1 ", "#   $EMAILDATA_SMTP_RATE_PER_HOST=0.25 "}},
		{name: "none set", want: []string{"#   $JOB_COMPLETION_INDEX=(unset) ", "#   $EMAILDATA_FLEET_SEATS=(unset) "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range jobEnv {
				t.Setenv(e.name, tc.env[e.name])
			}
			got := JobEnvComment()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			if n := strings.Count(got, "\n"); n != len(jobEnv)+1 {
				t.Errorf("%d lines, want %d:\n%s", n, len(jobEnv)+1, got)
			}
			if _, err := cfgv1.Decode([]byte(got + "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n")); err != nil {
				t.Errorf("the block does not load as part of a file: %v", err)
			}
		})
	}
}
