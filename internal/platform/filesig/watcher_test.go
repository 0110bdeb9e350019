package filesig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatcherReload: a load that fails is counted but not applied; a file
// that changes during every read is read 4 times and the signature kept is
// the one after the last read, so the next poll sees no change.
func TestWatcherReload(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		fail      bool
		touch     bool // rewrite the file during each read
		wantCalls int
		applied   bool
	}{
		{name: "ok", wantCalls: 1, applied: true},
		{name: "error", fail: true, wantCalls: 1},
		{name: "changing", touch: true, wantCalls: 4, applied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, applied := 0, false
			w := NewWatcher(time.Hour, []string{p}, func(prev []string) ([]string, func(), error) {
				calls++
				if tt.touch {
					if err := os.WriteFile(p, make([]byte, calls+1), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if tt.fail {
					return prev, nil, errors.New("bad file")
				}
				return []string{p}, func() { applied = true }, nil
			})
			err := w.Reload()
			if (err != nil) != tt.fail || (w.LastError() != nil) != tt.fail {
				t.Errorf("Reload = %v, LastError = %v, want failure %v", err, w.LastError(), tt.fail)
			}
			if calls != tt.wantCalls || applied != tt.applied || w.Loads() != 1 {
				t.Errorf("calls %d applied %v loads %d, want %d %v 1", calls, applied, w.Loads(), tt.wantCalls, tt.applied)
			}
			if !w.sig.Same(Stat([]string{p})) {
				t.Error("kept signature is not the one after the reload")
			}
		})
	}
}

// TestWatcherRun: Run reloads when a file changes, and only then.
func TestWatcherRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(2*time.Millisecond, []string{p}, func([]string) ([]string, func(), error) {
		return []string{p}, nil, nil
	})
	w.Reload()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	time.Sleep(30 * time.Millisecond)
	if n := w.Loads(); n != 1 {
		t.Fatalf("%d loads without a change, want 1", n)
	}
	if err := os.WriteFile(p, []byte("22"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Loads() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no reload after the file changed")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
