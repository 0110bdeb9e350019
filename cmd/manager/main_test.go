package main

import (
	"flag"
	"io"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/flagtable"
)

// TestFlagsInMigrationTable: every flag of the manager has its row in the
// migration table of docs/configuration.md, and there are at most 12
// besides --config (issue 32): the settings are the file's.
func TestFlagsInMigrationTable(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindAll(fs, cfgv1.Default())
	flagtable.Check(t, "manager", fs, flagtable.MaxFlags)
}

// TestFileThenFlags: the file's values reach the manager's options; a
// flag that was a setting is refused (its field is in the migration
// table), and a process flag given applies.
func TestFileThenFlags(t *testing.T) {
	conf, err := cfgv1.Decode([]byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
		"executor:\n  jobs:\n    parallelism: 3\n    ttlAfterFinished: 10m\n    resources:\n      memory: 1Gi\n" +
		"verification:\n  smtp:\n    heloName: file.example.org\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	f := bindAll(fs, conf)
	fs.SetOutput(io.Discard)
	if err := fs.Parse([]string{"--smtp-helo=flag.example.org"}); err == nil {
		t.Error("--smtp-helo accepted: it is verification.smtp.heloName now")
	}
	if err := fs.Parse([]string{"--leader-elect", "--metrics-bind-address=0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.apply(&f.o); err != nil {
		t.Fatal(err)
	}
	if got := f.o.Verify.Probe.HELOName; got != "file.example.org" {
		t.Errorf("HELO %q, want the file's", got)
	}
	if !f.o.LeaderElection || f.o.MetricsAddr != "0" {
		t.Errorf("leader election %v, metrics %q: want the flags'", f.o.LeaderElection, f.o.MetricsAddr)
	}
	if f.o.Job.Parallelism != 3 || f.o.Job.TTLSecondsAfterFinished != int32((10*time.Minute).Seconds()) {
		t.Errorf("parallelism %d, ttl %d: want the file's", f.o.Job.Parallelism, f.o.Job.TTLSecondsAfterFinished)
	}
	if m := f.o.Job.Resources.Requests.Memory(); m.Value() != 1<<30 {
		t.Errorf("memory %v, want the file's 1Gi", m)
	}
}
