package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
)

// TestOneVocabulary checks that slog callers and logr callers (the
// controllers) write the same keys in the same format.
func TestOneVocabulary(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, Options{Level: slog.LevelInfo, Format: FormatJSON})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	l.Error("from slog", KeyError, boom.Error())
	Logr(l).Error(boom, "from logr")
	Logr(l).V(1).Info("hidden at info")
	l.Debug("hidden too")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if rec[KeyError] != "boom" || rec["level"] != "ERROR" {
			t.Errorf("record %v: want %s=boom at ERROR", rec, KeyError)
		}
	}
}

func TestFlagsAndFormats(t *testing.T) {
	tests := []struct {
		args    []string
		level   slog.Level
		format  string
		wantErr bool
	}{
		{nil, slog.LevelInfo, FormatJSON, false},
		{[]string{"-log-level", "debug", "-log-format", "text"}, slog.LevelDebug, FormatText, false},
		{[]string{"-log-level", "WARN"}, slog.LevelWarn, FormatJSON, false},
		{[]string{"-log-format", "xml"}, slog.LevelInfo, "xml", true},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var o Options
		o.BindFlags(fs, Options{Level: slog.LevelInfo, Format: FormatJSON})
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if o.Level != tt.level || o.Format != tt.format {
			t.Errorf("%v: got %v %q", tt.args, o.Level, o.Format)
		}
		if _, err := New(&bytes.Buffer{}, o); (err != nil) != tt.wantErr {
			t.Errorf("%v: New error %v, want error %v", tt.args, err, tt.wantErr)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	var o Options
	o.BindFlags(fs, Options{})
	if err := fs.Parse([]string{"-log-level", "loud"}); err == nil {
		t.Error("-log-level loud accepted")
	}
}
