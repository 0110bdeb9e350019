package main

import (
	"flag"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestFlagsInMigrationTable: every flag of the API has its row in the
// migration table of docs/configuration.md, and there are at most 12
// besides --config (issue 32): the settings are the file's.
func TestFlagsInMigrationTable(t *testing.T) {
	known := map[string]bool{}
	for _, f := range cfgv1.Flags {
		known[f.Flag] = true
	}
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	bindAll(fs, cfgv1.Default())
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !known[f.Name] {
			t.Errorf("--%s is not in v1alpha1.Flags", f.Name)
		}
	})
	if n == 0 || n > 12 {
		t.Fatalf("%d flags, want 1 to 12 besides --config", n)
	}
}

// TestInteractiveTimeouts: the API's SMTP timeouts come from
// verification.interactive, and the file's rate limit reaches it.
func TestInteractiveTimeouts(t *testing.T) {
	conf, err := cfgv1.Decode([]byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
		"verification:\n  interactive:\n    connectTimeout: 2s\napi:\n  rateLimit:\n    perSecond: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	f := bindAll(fs, conf)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if f.vc.Probe.ConnectTimeout != 2*time.Second || f.o.RateLimit != 7 {
		t.Errorf("connect timeout %v, rate %v: want the file's", f.vc.Probe.ConnectTimeout, f.o.RateLimit)
	}
}
