package stackrun

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartConfig: with Config, Start writes it beside the log and passes
// --config FILE before the flags; without, the flags alone.
func TestStartConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config []byte
	}{
		{"a configuration", []byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n")},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			argsFile := filepath.Join(dir, "args")
			// A stand-in for the local stack: it records its arguments
			// and prints the banner's three lines.
			bin := filepath.Join(dir, "stack")
			script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\n" +
				"echo '  kubeconfig:  /k'; echo '  REST API:    http://127.0.0.1:1'; echo '  API key:     key'\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(dir, "localstack.log")
			st, err := Start(context.Background(), Options{Bin: bin, Root: dir, Args: []string{"--dir", "d"},
				Config: tc.config, LogPath: log, StartTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if st.APIKey != "key" || st.Kubeconfig != "/k" {
				t.Errorf("banner read as %+v", st)
			}
			select {
			case <-st.exited:
			case <-time.After(time.Minute):
				t.Fatal("the stand-in did not exit")
			}
			b, err := os.ReadFile(argsFile)
			if err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(dir, "localstack.config.yaml")
			want := "--dir\nd\n"
			if tc.config != nil {
				want = "--config\n" + conf + "\n" + want
				if got, err := os.ReadFile(conf); err != nil || string(got) != string(tc.config) {
					t.Errorf("config file %q, %v; want %q", got, err, tc.config)
				}
			}
			if string(b) != want {
				t.Errorf("args %q, want %q", strings.Split(string(b), "\n"), strings.Split(want, "\n"))
			}
		})
	}
}
