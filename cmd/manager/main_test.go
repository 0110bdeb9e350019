package main

import (
	"flag"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestFlagsInMigrationTable: every flag of the manager has its row in the
// migration table of docs/configuration.md.
func TestFlagsInMigrationTable(t *testing.T) {
	known := map[string]bool{}
	for _, f := range cfgv1.Flags {
		known[f.Flag] = true
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindAll(fs, cfgv1.Default())
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !known[f.Name] {
			t.Errorf("--%s is not in v1alpha1.Flags", f.Name)
		}
	})
	if n < 50 {
		t.Fatalf("%d flags only", n)
	}
}

// TestFileThenFlags: the file's values are the flags' defaults, and a
// flag given overrides the file.
func TestFileThenFlags(t *testing.T) {
	conf, err := cfgv1.Decode([]byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
		"executor:\n  jobs:\n    parallelism: 3\n    ttlAfterFinished: 10m\n    resources:\n      memory: 1Gi\n" +
		"verification:\n  smtp:\n    heloName: file.example.org\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	f := bindAll(fs, conf)
	if err := fs.Parse([]string{"--smtp-helo=flag.example.org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.apply(&f.o); err != nil {
		t.Fatal(err)
	}
	if got := f.o.Verify.Probe.HELOName; got != "flag.example.org" {
		t.Errorf("HELO %q, want the flag's", got)
	}
	if f.o.Job.Parallelism != 3 || f.o.Job.TTLSecondsAfterFinished != int32((10*time.Minute).Seconds()) {
		t.Errorf("parallelism %d, ttl %d: want the file's", f.o.Job.Parallelism, f.o.Job.TTLSecondsAfterFinished)
	}
	if m := f.o.Job.Resources.Requests.Memory(); m.Value() != 1<<30 {
		t.Errorf("memory %v, want the file's 1Gi", m)
	}
}
