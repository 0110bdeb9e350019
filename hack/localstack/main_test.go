package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/flagtable"
	"github.com/emaildata/emaildata/internal/wiring"
)

// TestFlagsBounded: the local stack keeps at most flagtable.MaxFlags
// flags besides --config, each in the migration table.
func TestFlagsBounded(t *testing.T) {
	fs := flag.NewFlagSet("localstack", flag.ContinueOnError)
	bindFlags(fs, cfgv1.Default())
	flagtable.Check(t, "localstack", fs, flagtable.MaxFlags)
}

// TestLoadConfig: without a file the stack runs configuration.yaml over
// the Configuration's defaults; a file is read over that, a key it writes
// replacing the local value (an empty list included) and a key it leaves
// out keeping it; a flag given overrides both.
func TestLoadConfig(t *testing.T) {
	def := cfgv1.Default()
	cases := []struct {
		name  string
		file  string // "" : no --config
		args  []string
		check func(*cfgv1.Configuration) string
	}{
		{name: "no file: offline, loopback callbacks, text logs, lists in-process",
			check: func(c *cfgv1.Configuration) string {
				if c.Verification.DNS.Server != "off" || c.Verification.SMTP.Enabled || c.Logging.Format != "text" ||
					c.Executor.Mode != "local" || !slices.Equal(c.Manager.CallbackAllowCIDRs, []string{"127.0.0.0/8", "::1/128"}) {
					return "not the local defaults"
				}
				if c.Pipeline.ShardBy != def.Pipeline.ShardBy || c.Verification.DNS.Timeout != def.Verification.DNS.Timeout {
					return "a key the local file leaves out is not the Configuration's default"
				}
				return ""
			}},
		{name: "a file turns the network on and keeps the rest local",
			file: "verification:\n  dns:\n    server: system\n    timeout: 10s\n  smtp:\n    enabled: true\n",
			check: func(c *cfgv1.Configuration) string {
				if c.Verification.DNS.Server != "system" || !c.Verification.SMTP.Enabled || c.Verification.DNS.Timeout.Duration.String() != "10s" {
					return "the file's keys not read"
				}
				if c.Executor.Mode != "local" || len(c.Manager.CallbackAllowCIDRs) != 2 || c.Logging.Format != "text" {
					return "a local default the file leaves out was lost"
				}
				return ""
			}},
		{name: "an empty list in the file refuses callbacks to loopback",
			file: "manager:\n  callbackAllowCIDRs: []\n",
			check: func(c *cfgv1.Configuration) string {
				if len(c.Manager.CallbackAllowCIDRs) != 0 {
					return "the local callback ranges kept"
				}
				return ""
			}},
		{name: "flags override the file", file: "executor:\n  mode: local\nlogging:\n  format: json\n",
			args: []string{"--executor=job", "--log-format=text", "--dir=/tmp/x"},
			check: func(c *cfgv1.Configuration) string {
				if c.Executor.Mode != "job" || c.Logging.Format != "text" {
					return "a flag given did not override the file"
				}
				return ""
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = filepath.Join(t.TempDir(), "c.yaml")
				data := "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" + tc.file
				if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := loadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("localstack", flag.ContinueOnError)
			bindFlags(fs, c)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if _, err := wiring.ApplyFlags(c, fs); err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(c); msg != "" {
				t.Errorf("%s: %+v", msg, c)
			}
		})
	}
}

// TestLoadConfigRefusesTypos: a misspelt key of the --config file is an
// error naming it.
func TestLoadConfigRefusesTypos(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nverification:\n  smtp:\n    enabeld: true\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path); err == nil || !strings.Contains(err.Error(), "verification.smtp.enabeld") {
		t.Errorf("err = %v, want one naming verification.smtp.enabeld", err)
	}
}
