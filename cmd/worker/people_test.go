package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// TestPeopleGenerateAndImport: generated people import cleanly and are in
// the store afterwards; the same seed gives the same file.
func TestPeopleGenerateAndImport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "people.csv")
	var stderr bytes.Buffer
	if code := run(ctx, []string{"people-generate", "--n", "300", "--seed", "9", "--out", csvPath}, &stderr); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr.String())
	}
	again := filepath.Join(dir, "again.csv")
	_ = run(ctx, []string{"people-generate", "--n", "300", "--seed", "9", "--out", again}, &stderr)
	a, _ := os.ReadFile(csvPath)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) || len(a) == 0 {
		t.Fatal("the same seed must give the same file")
	}

	url := "bolt://" + filepath.Join(dir, "people.db")
	var out bytes.Buffer
	if err := runPeopleImport(ctx, []string{"--people-url", url, "--in", csvPath}, &out); err != nil {
		t.Fatal(err)
	}
	var sum people.ImportSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Imported != 300 || sum.Failed != 0 {
		t.Fatalf("summary %s (%v)", out.String(), err)
	}
	ps, err := people.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	want := people.GenerateSlice(9, 300)[17]
	got, err := ps.Get(ctx, people.EmailKey(want.Email))
	if err != nil || got == nil || got.Last != want.Last {
		t.Fatalf("record %q not imported: %v %v", want.Email, got, err)
	}
}

// TestPeopleImportBadRows: a malformed row is reported by line; the import
// stops (exit 42, bad input) or goes on, as asked; the summary goes to the
// blob store for the Dataset controller.
func TestPeopleImportBadRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var gen bytes.Buffer
	if err := runPeopleGenerate([]string{"--n", "3", "--seed", "2"}, &gen); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(gen.String(), "\n")
	header := strings.Split(strings.TrimSpace(lines[0]), ",")
	bad := make([]string, len(header))
	bad[0] = "not-an-email" // the email column is first
	csv := lines[0] + lines[1] + strings.Join(bad, ",") + "\n" + lines[2] + lines[3]
	storeURL := "file://" + filepath.Join(dir, "store")
	st, err := blobstore.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteAll(ctx, "datasets/x/source.csv", []byte(csv), nil); err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	code := run(ctx, []string{"people-import", "--people-url", "bolt://" + filepath.Join(dir, "a.db"),
		"--blob-url", storeURL, "--key", "datasets/x/source.csv", "--summary-key", "datasets/x/summary.json"}, &stderr)
	if code != 42 {
		t.Fatalf("stop mode: exit %d, want 42 (bad input): %s", code, stderr.String())
	}
	var sum people.ImportSummary
	if err := st.ReadJSON(ctx, "datasets/x/summary.json", 1<<20, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 1 || len(sum.Errors) != 1 || !strings.Contains(sum.Errors[0], "line 3") || strings.Contains(sum.Errors[0], "not-an-email") {
		t.Fatalf("summary %+v: want line 3 named and no row contents", sum)
	}

	var out bytes.Buffer
	err = runPeopleImport(ctx, []string{"--people-url", "bolt://" + filepath.Join(dir, "b.db"),
		"--blob-url", storeURL, "--key", "datasets/x/source.csv", "--continue-on-error"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Imported != 3 || sum.Failed != 1 {
		t.Fatalf("continue mode: %s", out.String())
	}
}

// TestPeopleImportPhoneStatus: the Dataset's worker loads a phone status
// file (a phone column, no email column) into the same store; a bad row
// stops it as bad input.
func TestPeopleImportPhoneStatus(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, "phones.csv")
	if err := os.WriteFile(in, []byte("phone,status,prepaid,connected_score\n+1 650 253 0000,live,false,92\n020 7946 0958,disconnected,,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "bolt://" + filepath.Join(dir, "people.db")
	var out bytes.Buffer
	if err := runPeopleImport(ctx, []string{"--people-url", url, "--in", in, "--continue-on-error"}, &out); err != nil {
		t.Fatal(err)
	}
	var sum people.ImportSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Imported != 1 || sum.Failed != 1 || !strings.Contains(sum.Errors[0], "line 3: phone") {
		t.Fatalf("summary %s (%v)", out.String(), err)
	}
	ps, err := people.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ps.(people.PhoneStore).LookupPhone(ctx, "+16502530000")
	ps.Close()
	if err != nil || got == nil || got.Status != people.PhoneLive || got.ConnectedScore == nil || *got.ConnectedScore != 92 {
		t.Fatalf("imported: %+v, %v", got, err)
	}
	var stderr bytes.Buffer
	if code := run(ctx, []string{"people-import", "--people-url", url, "--in", in}, &stderr); code != 42 {
		t.Fatalf("stop mode: exit %d, want 42: %s", code, stderr.String())
	}
}
