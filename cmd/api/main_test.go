package main

import (
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/flagtable"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestFlagsInMigrationTable: every flag of the api has its row in the
// migration table of docs/configuration.md, and there are at most 12
// besides --config (issue 32): the settings are the file's.
func TestFlagsInMigrationTable(t *testing.T) {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	bindAll(fs, cfgv1.Default())
	flagtable.Check(t, "api", fs, flagtable.MaxFlags)
}

// TestInteractiveTimeouts: the API's SMTP timeouts come from
// verification.interactive, and the file's rate limit reaches it.
func TestInteractiveTimeouts(t *testing.T) {
	conf, err := cfgv1.Decode([]byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n" +
		"verification:\n  interactive:\n    connectTimeout: 2s\napi:\n  rateLimit:\n    perSecond: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	f := bindAll(fs, conf)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if f.vc.Probe.ConnectTimeout != 2*time.Second || f.o.RateLimit != 7 {
		t.Errorf("connect timeout %v, rate %v: want the file's", f.vc.Probe.ConnectTimeout, f.o.RateLimit)
	}
}

// TestConsoleConfiguration: api.console.enabled of the configuration file
// turns the web console off (404 at /console/), the default serves it,
// and --console is no flag any more (the file is its one home).
func TestConsoleConfiguration(t *testing.T) {
	const head = "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n"
	for _, c := range []struct {
		name, yaml string
		args       []string
		want       int
	}{
		{"default", head, nil, http.StatusOK},
		{"disabled in the file", head + "api:\n  console:\n    enabled: false\n", nil, http.StatusNotFound},
		{"enabled in the file", head + "api:\n  console:\n    enabled: true\n", nil, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			conf, err := cfgv1.Decode([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("api", flag.ContinueOnError)
			f := bindAll(fs, conf)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			f.parsed()
			h := restapi.New(f.o.Config, apikey.NewStore(), nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil))).Handler()
			for _, path := range []string{"/console/", "/console/app.js"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != c.want {
					t.Errorf("GET %s: %d, want %d", path, rec.Code, c.want)
				}
			}
		})
	}
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bindAll(fs, cfgv1.Default())
	if err := fs.Parse([]string{"--console=false"}); err == nil {
		t.Error("--console is accepted as a flag; the configuration file is its one home")
	}
}
