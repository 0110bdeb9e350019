package wiring

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
)

// TestFraudHistoryStores: where --fraud-history-url (and the fleet
// backend) put fraud history and feedback, what is refused, and that the
// choice is said at start.
func TestFraudHistoryStores(t *testing.T) {
	t.Setenv("FRAUD_HISTORY_URL", "redis://10.0.0.9:6379/1")
	t.Setenv("FRAUD_HISTORY_KEY", "from-the-environment")
	if d := DefaultFraudConfig(); d.HistoryURL != "redis://10.0.0.9:6379/1" || d.HistoryKey != "from-the-environment" {
		t.Errorf("DefaultFraudConfig: %+v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyKey := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyKey, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	vc := DefaultVerifyConfig()
	vc.DNSServer = "off"
	vc.Fleet.URL = redistest.URL(t, "wiringfraud") // fails under CI=true without Redis
	e, err := NewEngine(ctx, vc)
	if err != nil {
		t.Fatal(err)
	}
	fl := FleetOf(e)
	if fl == nil {
		t.Fatal("no fleet in an engine with --fleet-url")
	}
	for _, tc := range []struct {
		name     string
		c        FraudConfig
		err      string
		feedback bool   // BeginFeedback works
		log      string // in the start log
	}{
		{name: "none: memory for /fr, feedback refused", c: FraudConfig{},
			log: "POST /feedback/v1 is refused"},
		{name: "memory (make run)", c: FraudConfig{HistoryURL: HistoryMemory}, feedback: true,
			log: "kept in this process's memory: lost on restart"},
		{name: "redis", c: FraudConfig{HistoryURL: redistest.URL(t, "wiringfraud"), HistoryKeyFile: keyFile}, feedback: true,
			log: "kept in Redis"},
		{name: "the fleet backend", c: FraudConfig{Fleet: fl, HistoryKeyFile: keyFile}, feedback: true,
			log: "kept on the fleet backend"},
		{name: "the fleet backend, the key from the environment", c: FraudConfig{Fleet: fl, HistoryKey: "0123456789abcdef"}, feedback: true,
			log: "kept on the fleet backend"},
		{name: "the fleet backend without a key", c: FraudConfig{Fleet: fl},
			log: "fraud history not kept on the fleet backend: no key"},
		{name: "redis without a key", c: FraudConfig{HistoryURL: "redis://127.0.0.1:6379/0"}, err: "needs --fraud-history-key-file"},
		{name: "postgres without a key", c: FraudConfig{HistoryURL: "postgres://u@127.0.0.1/test"}, err: "needs --fraud-history-key-file"},
		{name: "an empty key", c: FraudConfig{HistoryURL: HistoryMemory, HistoryKeyFile: emptyKey}, err: "is empty"},
		{name: "another scheme", c: FraudConfig{HistoryURL: "bolt:///x.db", HistoryKeyFile: keyFile}, err: "not postgres://, redis:// or"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.c.Budget == 0 {
				tc.c.Budget = DefaultFraudConfig().Budget
			}
			var logs bytes.Buffer
			tc.c.Log = slog.New(slog.NewTextHandler(&logs, nil))
			s, err := NewFraud(ctx, tc.c, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("start log %q lacks %q", logs.String(), tc.log)
			}
			f, err := s.BeginFeedback(ctx, "acme")
			switch {
			case tc.feedback && err != nil:
				t.Errorf("feedback refused: %v", err)
			case !tc.feedback && !errors.Is(err, fraud.ErrFeedbackOff):
				t.Errorf("feedback kept: %v", err)
			case f != nil:
				f.Abort()
			}
		})
	}
}
