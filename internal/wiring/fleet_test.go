package wiring

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
)

// With --fleet-url, the history lives in the fleet backend unless
// --history-url says otherwise, and the engine reports both's counters.
func TestEngineSharedParts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("HISTORY_KEY", "wiring-test-key-0123456789")
	c := DefaultVerifyConfig()
	c.DNSServer = "off"
	c.Fleet.URL = redistest.URL(t, "wiringtest") // fails under CI=true without Redis
	e, err := NewEngine(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if e.History == nil {
		t.Fatal("no history with --fleet-url")
	}
	got := EngineCounters(e)
	for _, k := range []string{"fleet_fallbacks", "fleet_lease_waits", "history_hits", "history_errors"} {
		if _, ok := got[k]; !ok {
			t.Errorf("counter %s missing from %v", k, got)
		}
	}
	c.HistoryURL = "off"
	if e, err = NewEngine(ctx, c); err != nil || e.History != nil {
		t.Errorf("--history-url=off: %v %v", e.History, err)
	}
	c.HistoryURL = "bolt://" + filepath.Join(t.TempDir(), "h.db")
	if e, err = NewEngine(ctx, c); err != nil || e.History == nil {
		t.Errorf("--history-url=bolt: %v %v", e.History, err)
	}
}

// A fleet backend unreachable at start is no reason to stop: the engine
// starts, the fleet in fallback, the history skipped until it answers.
func TestEngineWithBackendDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("HISTORY_KEY", "wiring-test-key-0123456789")
	c := DefaultVerifyConfig()
	c.DNSServer = "off"
	c.Fleet.URL = "redis://" + addr + "/0"
	e, err := NewEngine(ctx, c)
	if err != nil {
		t.Fatalf("engine with the backend down: %v", err)
	}
	if got := EngineCounters(e)["fleet_fallbacks"]; got != 1 {
		t.Errorf("fleet_fallbacks = %v, want 1", got)
	}
	if up, _ := FleetHealth(e)(); up {
		t.Error("FleetHealth says up with the backend down")
	}
	if _, err := e.History.Lookup(ctx, "api/acme", []string{"a@example.test"}, nil); err == nil {
		t.Error("a history lookup with the backend down did not fail (it must be skipped, not trusted)")
	}
	for _, bad := range []string{"http://x", "redis://127.0.0.1:6379/x"} {
		c.Fleet.URL = bad
		if _, err := NewEngine(ctx, c); err == nil {
			t.Errorf("--fleet-url=%s accepted", bad)
		}
	}
}

// A history needs its key, from $HISTORY_KEY or --history-key-file: without
// one the engine refuses to start and says what to set; two engines with
// different keys on one store report the mismatch through HistoryHealth.
func TestHistoryNeedsKey(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := DefaultVerifyConfig()
	c.DNSServer = "off"
	c.HistoryURL = redistest.URL(t, "wiringkey")
	t.Setenv("HISTORY_KEY", "")
	if _, err := NewEngine(ctx, c); err == nil || !strings.Contains(err.Error(), "needs a key: set HISTORY_KEY") {
		t.Fatalf("no key: %v", err)
	}
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("file-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.HistoryKeyFile = file
	a, err := NewEngine(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := HistoryHealth(a)(); !ok {
		t.Error("the first engine reports a mismatch")
	}
	// The key as the manager and the API read it from the installation
	// secret (HistoryKey, trimmed as the file is) keys the same history.
	c.HistoryKeyFile, c.HistoryKey = "", []byte("file-key-0123456789")
	bySecret, err := NewEngine(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if ok, detail := HistoryHealth(bySecret)(); !ok {
		t.Errorf("the key read from the Secret: %q, want the file's key", detail)
	}
	c.HistoryKey = nil
	t.Setenv("HISTORY_KEY", "another-key-0123456789")
	b, err := NewEngine(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if ok, detail := HistoryHealth(b)(); ok || !strings.Contains(detail, "HISTORY_KEY") {
		t.Errorf("another key: health %v %q, want the mismatch", ok, detail)
	}
	if HistoryHealth(OfflineEngine()) != nil {
		t.Error("HistoryHealth of an engine without a history")
	}
}
