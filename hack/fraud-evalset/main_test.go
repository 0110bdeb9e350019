package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedOutputIsCurrent regenerates the set with the default flags
// and compares it with the files committed in internal/refdata/fraud/testdata: the
// generator is deterministic and the committed set is its output.
func TestCommittedOutputIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, generate(3000, 1, 0.2)); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "internal", "refdata", "fraud", "testdata")
	for _, name := range []string{
		"evalset.jsonl", "evalset-geo.json",
		"evalset-lists/tor.txt", "evalset-lists/vpn.txt", "evalset-lists/proxy.txt", "evalset-lists/hosting.txt",
	} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(committed, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator output; run: go run ./hack/fraud-evalset", name)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := generate(300, 7, 0.2), generate(300, 7, 0.2)
	if len(a) != len(b) {
		t.Fatal("lengths differ")
	}
	for i := range a {
		if a[i].Input != b[i].Input || a[i].Label != b[i].Label || !a[i].At.Equal(b[i].At) {
			t.Fatalf("row %d differs", i)
		}
	}
	if c := generate(300, 8, 0.2); c[0].Input == a[0].Input && c[1].Input == a[1].Input {
		t.Error("seed has no effect")
	}
}
