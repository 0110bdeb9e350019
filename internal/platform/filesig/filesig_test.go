package filesig

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSame(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{a, b}
	s0 := Stat(paths)
	if !s0.Same(Stat(paths)) {
		t.Fatal("unchanged files differ")
	}
	if err := os.WriteFile(b, []byte("x"), 0o644); err != nil { // a missing file appears
		t.Fatal(err)
	}
	s1 := Stat(paths)
	if s0.Same(s1) {
		t.Fatal("a new file went unnoticed")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(a, later, later); err != nil { // same size, new mtime
		t.Fatal(err)
	}
	if s1.Same(Stat(paths)) {
		t.Fatal("a rewritten file went unnoticed")
	}
}
