package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestDocsFresh fails when docs/configuration.md is not what the type,
// its comments and its defaults generate.
func TestDocsFresh(t *testing.T) {
	want, err := Render(typesFile())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("docs/configuration.md is stale: run `make docs` and commit it")
	}
}

// TestDocsCoverEveryField: every key of the type has a row with a
// description, so a new setting without a comment fails here.
func TestDocsCoverEveryField(t *testing.T) {
	out, err := Render(typesFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "| `") && !strings.HasPrefix(line, "| `--") && strings.HasSuffix(line, "|  |") {
			t.Errorf("a field without a comment: %s", line)
		}
	}
	if !strings.Contains(string(out), "`verification.smtp.heloName`") || !strings.Contains(string(out), "`api.console.enabled`") {
		t.Error("fields missing from the document")
	}
}

// TestMigrationFieldsExist: each migration row names a real key.
func TestMigrationFieldsExist(t *testing.T) {
	out, err := Render(typesFile())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range cfgv1.Flags {
		if seen[f.Flag] {
			t.Errorf("--%s listed twice", f.Flag)
		}
		seen[f.Flag] = true
		if f.Field == "" {
			continue
		}
		// installation.secrets.<kind> are keys of a map.
		field := f.Field
		if strings.HasPrefix(field, "installation.secrets.") {
			field = "installation.secrets"
		}
		if !strings.Contains(string(out), "| `"+field+"` |") {
			t.Errorf("--%s maps to %q, which is no key of the Configuration", f.Flag, f.Field)
		}
	}
}
