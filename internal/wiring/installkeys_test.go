package wiring

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// The installation secrets of the two histories accept no key their
// history would refuse: the verification history's minimum is
// evhistory's, and both are text (they may reach a worker's environment).
func TestHistoryInstallSecretSizes(t *testing.T) {
	for _, k := range []installsecret.Kind{installsecret.HistoryKey, installsecret.FraudHistoryKey} {
		s, ok := installsecret.Lookup(k)
		if !ok || s.MinBytes < evhistory.MinSecretBytes || !s.Text {
			t.Errorf("%s: %+v, want text of at least %d bytes", k, s, evhistory.MinSecretBytes)
		}
	}
	if s, _ := installsecret.Lookup(installsecret.HistoryKey); s.LegacyField != evhistory.SecretEnv {
		t.Errorf("legacy field %q, want %s (the Secrets of before held the variable's name)", s.LegacyField, evhistory.SecretEnv)
	}
}

// Where a process's verification history key comes from: what it was
// given (HistoryKey, read from the installation secret; --history-key-file;
// $HISTORY_KEY, in that order), or, when it opens a history and was given
// none, its installation secret (NeedsHistoryKeySecret). A key made for
// the Secret and read by name is the key a worker gets from
// $HISTORY_KEY: both trimmed alike.
func TestHistoryKeySources(t *testing.T) {
	spec, _ := installsecret.Lookup(installsecret.HistoryKey)
	made, err := spec.Make(bytes.NewReader(bytes.Repeat([]byte{7}, spec.Bytes)))
	if err != nil {
		t.Fatal(err)
	}
	byName, err := spec.Key(map[string][]byte{installsecret.Field: append(made[installsecret.Field], '\n')})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("file-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opened := &evhistory.History{}
	for _, tc := range []struct {
		name     string
		url      string
		fleet    string
		key      []byte
		file     string
		env      string
		history  *evhistory.History
		wantKey  string
		wantFrom string
		needs    bool
	}{
		{name: "no history", needs: false},
		{name: "history off", url: "off", fleet: "redis://r:6379/0"},
		{name: "history url, nothing given", url: "postgres://h/db", needs: true},
		{name: "fleet history, nothing given", fleet: "redis://r:6379/0", needs: true},
		{name: "read from the Secret", url: "postgres://h/db", key: byName, wantKey: string(byName), wantFrom: "the installation secret"},
		{name: "file", url: "postgres://h/db", file: file, env: "env-key-0123456789", wantKey: "file-key-0123456789", wantFrom: "--history-key-file"},
		{name: "worker environment", url: "postgres://h/db", env: string(made[installsecret.Field]) + "\n", wantKey: string(byName), wantFrom: "$HISTORY_KEY"},
		{name: "opened by the caller", url: "", history: opened},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(evhistory.SecretEnv, tc.env)
			c := DefaultVerifyConfig()
			c.HistoryURL, c.Fleet.URL, c.HistoryKey, c.HistoryKeyFile, c.History = tc.url, tc.fleet, tc.key, tc.file, tc.history
			if got := c.NeedsHistoryKeySecret(); got != tc.needs {
				t.Errorf("NeedsHistoryKeySecret %v, want %v", got, tc.needs)
			}
			key, from, err := c.GivenHistoryKey()
			if err != nil || string(key) != tc.wantKey || from != tc.wantFrom {
				t.Errorf("given %q from %q (%v), want %q from %q", key, from, err, tc.wantKey, tc.wantFrom)
			}
		})
	}
}

// The fraud history needs its installation secret when it is durable and
// shared, and no key was given ($FRAUD_HISTORY_KEY, which an installation
// that set it keeps, or --fraud-history-key-file); make run's memory
// history needs none.
func TestFraudNeedsKeySecret(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     FraudConfig
		fleet bool
		want  bool
	}{
		{"memory (make run)", FraudConfig{HistoryURL: HistoryMemory}, true, false},
		{"nothing named", FraudConfig{}, false, false},
		{"fleet backend", FraudConfig{}, true, true},
		{"postgres", FraudConfig{HistoryURL: "postgres://u@h/db"}, false, true},
		{"redis, $FRAUD_HISTORY_KEY given", FraudConfig{HistoryURL: "redis://h:6379/0", HistoryKey: "env-key"}, false, false},
		{"fleet, key file given", FraudConfig{HistoryKeyFile: "/etc/key"}, true, false},
	} {
		if got := tc.c.NeedsKeySecret(tc.fleet); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
