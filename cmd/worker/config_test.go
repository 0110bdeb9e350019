package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/flagtable"
)

// TestFlagsInMigrationTable: every flag of `worker run` and `worker
// shard` has its row in the migration table of docs/configuration.md,
// and each has at most 12 besides --config (issue 32): what differs per
// file, per run or per Job pod; the settings are the file's.
func TestFlagsInMigrationTable(t *testing.T) {
	for _, cmd := range []string{"run", "shard"} {
		var buf bytes.Buffer
		run(context.Background(), []string{cmd, "-h"}, &buf)
		flagtable.CheckUsage(t, "worker "+cmd, buf.String(), flagtable.MaxFlags)
	}
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	fs.String("config", "", "")
	bindShard(fs, cfgv1.Default())
	flagtable.Check(t, "worker shard", fs, flagtable.MaxFlags)
}

// configArg writes a configuration file of body (its sections, below
// apiVersion and kind) and returns the --config argument naming it.
func configArg(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	doc := "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" + body
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return "--config=" + path
}

// offlineBody turns DNS (and so SMTP) off: verdicts from syntax,
// corrections and lists.
const offlineBody = "verification:\n  dns:\n    server: \"off\"\n"

// offline is the --config argument of an offline run.
func offline(t *testing.T) string { t.Helper(); return configArg(t, offlineBody) }

// TestRunConfigFile: `worker run --config` reads the file (a misspelt
// key is refused with its line), and --print-config prints it.
func TestRunConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	head := "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n"
	if err := os.WriteFile(good, []byte(head+"verification:\n  smtp:\n    heloName: probe.example.org\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(head+"verification:\n  smtp:\n    heloname: probe.example.org\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if code := run(context.Background(), []string{"run", "--config", bad, "--in", "x", "--out", "y"}, &buf); code != 2 ||
		!strings.Contains(buf.String(), `line 5: unknown field "verification.smtp.heloname"`) {
		t.Errorf("misspelt key: exit %d, %s", code, buf.String())
	}
	r := &localRun{stderr: &buf}
	if err := r.flags([]string{"--config=" + good, "--in", "x", "--out", "y"}); err != nil {
		t.Fatal(err)
	}
	if r.vc.Probe.HELOName != "probe.example.org" {
		t.Errorf("HELO %q, want the file's", r.vc.Probe.HELOName)
	}
}

// TestShardByReference: a shard run as a by-reference Job runs it — the
// store and the settings in the mounted file, the per-list values in the
// environment, three arguments.
func TestShardByReference(t *testing.T) {
	const uid = "by-ref-uid"
	url, _ := prepareFileStore(t, uid, "name,email\nAnn,ann@example.com\nBob,bob@example\n", 1<<20)
	conf := filepath.Join(t.TempDir(), "config.yaml")
	doc := "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nstore:\n  url: " + url + "\nverification:\n  dns:\n    server: \"off\"\n"
	if err := os.WriteFile(conf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "0")
	t.Setenv("EMAILDATA_FLEET_SEATS", "1")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"shard", "--config=" + conf, "--list-uid=" + uid}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if sum := readSummary(t, url, uid, 0); sum.Rows != 2 || sum.Reporting["status"]["invalid"] != 1 {
		t.Errorf("summary %+v", sum)
	}
}
