package wiring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listfile"
)

// IntoConfig is VerifyFrom's inverse: the settings a manager was given
// as values reach its Job workers, through their configuration file,
// unchanged (but what is a Job's own: its seats, and the key file
// workers do not get).
func TestIntoConfigRoundTrip(t *testing.T) {
	c := DefaultVerifyConfig()
	c.DNSServer, c.Probe.GreylistRetry, c.Probe.MaxSessions = "10.0.0.10:53", 90*time.Second, 300
	c.Probe.GreetingTimeout, c.Probe.PipelineDepth, c.RowsInFlight = 45*time.Second, 4, 50_000
	c.Probe.HELOName, c.Probe.MaxRefusals, c.Probe.HostMemoryTTL = "probe.example.org", 3, 2*time.Hour
	c.Proxies = StringList{"socks5://10.1.0.1:1080", "socks5://10.1.0.2:1080"}
	c.ListsDir, c.ExtraTLDs, c.SMTPAllowCIDRs = "/etc/emaildata/lists", "test,internal", "10.0.0.0/8"
	c.Fleet.URL, c.HistoryURL, c.Fleet.Seat, c.Fleet.Seats = "redis://10.0.0.5:6379/2", "postgres://history@10.0.0.6/ev", 3, 8
	c.Fleet.Egress, c.Fleet.LeaseTTL = "nat-a", 9*time.Second
	c.HistoryTTLs.CatchAll = 12 * time.Hour
	c.HistoryScope, c.HistoryKeyFile, c.HistoryKeyCheck = "shared", "/etc/emaildata/history/HISTORY_KEY", 30*time.Second
	lim := LimitsFrom(cfgv1.Default())
	lim.MaxRecordBytes = 4096
	data, err := WorkerConfigOf(c, lim, "file:///store", "bolt:///people.db")
	if err != nil {
		t.Fatal(err)
	}
	w, err := cfgv1.Decode(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	got := VerifyFrom(w)
	want := c
	want.HistoryKeyFile = ""                  // workers get $HISTORY_KEY
	want.Fleet.Seat, want.Fleet.Seats = -1, 1 // the Job's own (its environment)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if LimitsFrom(w) != lim || w.Store.URL != "file:///store" || w.People.URL != "bolt:///people.db" {
		t.Errorf("limits %+v store %q people %q", LimitsFrom(w), w.Store.URL, w.People.URL)
	}
}

// URLs with passwords never go into the workers' configuration: workers
// read them from their environment (executor.jobs.envFromSecret).
func TestWorkerConfigOfOmitsPasswords(t *testing.T) {
	c := DefaultVerifyConfig()
	c.Fleet.URL, c.HistoryURL = "redis://:s3cret@10.0.0.5:6379/2", "postgres://u:pw@10.0.0.6/ev"
	c.Proxies = StringList{"socks5://u:pw@10.1.0.1:1080", "socks5://10.1.0.2:1080"}
	data, err := WorkerConfigOf(c, LimitsFrom(cfgv1.Default()), "s3://k:s3cret@bucket", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cret") || strings.Contains(string(data), "pw@") {
		t.Errorf("a password in the workers' configuration:\n%s", data)
	}
	if !strings.Contains(string(data), "socks5://10.1.0.2:1080") {
		t.Error("a proxy without a password left out")
	}
}

func TestStringList(t *testing.T) {
	var l StringList
	for _, v := range []string{"a", "b, c", " ", "d,"} {
		l.Set(v)
	}
	if !slices.Equal(l, StringList{"a", "b", "c", "d"}) || l.String() != "a,b,c,d" {
		t.Fatalf("%q", l)
	}
}

func TestAPIDefaultsShorter(t *testing.T) {
	l, a := DefaultVerifyConfig(), DefaultAPIVerifyConfig()
	if a.Probe.GreetingTimeout >= l.Probe.GreetingTimeout || a.Probe.ConnectTimeout >= l.Probe.ConnectTimeout || a.Probe.HostPenaltyTTL >= l.Probe.HostPenaltyTTL {
		t.Fatalf("API %+v, lists %+v", a, l)
	}
}

// The Configuration's defaults are the prober's own: the prober the
// binaries build from them is configured exactly as smtpprobe.New
// configures a zero Config, but for the EHLO name and the sender.
func TestProberDefaultsAreSMTPProbes(t *testing.T) {
	c := DefaultVerifyConfig()
	p, err := NewProber(c)
	if err != nil {
		t.Fatal(err)
	}
	got, want := p.Config(), smtpprobe.DefaultConfig()
	want.HELOName, want.MailFrom = c.Probe.HELOName, c.Probe.MailFrom
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	compared := 0
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if k := f.Type.Kind(); k == reflect.Func || k == reflect.Interface {
			continue // the guard and the dialer are wiring's own
		}
		compared++
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("smtpprobe.Config.%s: the binaries run with %v, smtpprobe's default is %v", f.Name, g, w)
		}
	}
	if compared < 12 {
		t.Fatalf("compared %d fields only", compared)
	}
}

// docs/verification.md's table of the verification settings restates
// their defaults for lists and for the API, keyed by Configuration field:
// each must be cfgv1.Default()'s, the one home of defaults (the API's
// column: verification.interactive's field where it has one, as the API
// runs with those timeouts).
func TestREADMEFlagDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "verification.md"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfgv1.Default())
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var conf map[string]any
	if err := dec.Decode(&conf); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{} // every field of the migration table
	for _, f := range cfgv1.Flags {
		known[f.Field] = true
	}
	lookup := func(path string) (string, bool) {
		var v any = conf
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return "", false
			}
			if v, ok = m[k]; !ok {
				return "", known[path] // omitted when empty
			}
		}
		return fmt.Sprint(v), true
	}
	checked := 0
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		first := strings.TrimSpace(cells[min(1, len(cells)-1)])
		if len(cells) != 6 || !strings.HasPrefix(first, "`verification.") && !strings.HasPrefix(first, "`fleet.") {
			continue
		}
		fields := strings.Split(first, ", ")
		for _, f := range fields {
			if _, ok := lookup(strings.Trim(f, "`")); !ok {
				t.Errorf("docs/verification.md names %s, which is no Configuration field", f)
			}
		}
		for col := 2; col <= 3; col++ {
			vals := strings.Split(strings.TrimSpace(cells[col]), ", ")
			if len(vals) != len(fields) || vals[0] == "" || strings.HasPrefix(vals[0], "`$") {
				continue // an empty cell (not the API's), or from the environment
			}
			for i, f := range fields {
				name := strings.Trim(f, "`")
				if col == 3 {
					if rest, ok := strings.CutPrefix(name, "verification.smtp."); ok {
						if _, ok := lookup("verification.interactive." + rest); ok {
							name = "verification.interactive." + rest
						}
					}
				}
				def, ok := lookup(name)
				if !ok {
					continue // said above
				}
				checked++
				if !sameDefault(vals[i], def) {
					t.Errorf("docs/verification.md: %s defaults to %s (column %d), the Configuration (%s) to %q", f, vals[i], col, name, def)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d docs/verification.md defaults only: is the table still there?", checked)
	}
}

// sameDefault compares a README cell ("5/s", "100,000", "1m", "`system`")
// with a flag's default.
func sameDefault(cell, def string) bool {
	cell = strings.TrimSuffix(strings.ReplaceAll(strings.Trim(cell, "` "), ",", ""), "/s")
	if a, err := time.ParseDuration(cell); err == nil {
		b, err := time.ParseDuration(def)
		return err == nil && a == b
	}
	return cell == def
}

func TestBadProxy(t *testing.T) {
	c := DefaultVerifyConfig()
	c.Proxies = StringList{"http://proxy:8080"}
	if _, err := NewProber(c); err == nil || !strings.Contains(err.Error(), "--smtp-proxy") {
		t.Fatalf("err %v", err)
	}
}

// The list services' names are the EmailList API's.
func TestServiceNames(t *testing.T) {
	for _, name := range []string{string(listsv1.ServiceEmailValidation), string(listsv1.ServiceEmailIntelligence), string(listsv1.ServiceEmailAppend)} {
		reg := RegistryFor(nil, VerifyConfig{})
		RegisterPeople(reg, nil, nil)
		if _, err := reg.Lookup(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Rows in flight are a process's, shared by the shards it runs, and an
// offline engine (no DNS, so nothing waits) keeps few.
func TestRowsInFlight(t *testing.T) {
	c := DefaultVerifyConfig()
	if got := c.SharedBy(4).RowsInFlight; got != c.RowsInFlight/4 {
		t.Errorf("shared by 4: %d, want %d", got, c.RowsInFlight/4)
	}
	if got := c.SharedBy(1).RowsInFlight; got != c.RowsInFlight {
		t.Errorf("shared by 1: %d", got)
	}
	inFlight := func(e *verify.Engine, c VerifyConfig) int {
		svc, err := RegistryFor(e, c).Lookup(evlist.Name)
		if err != nil {
			t.Fatal(err)
		}
		return svc.(*evlist.Service).InFlight
	}
	if got := inFlight(OfflineEngine(), c); got != OfflineRowsInFlight {
		t.Errorf("offline engine: %d rows in flight, want %d", got, OfflineRowsInFlight)
	}
	c.RowsInFlight = 500
	if got := inFlight(OfflineEngine(), c); got != 500 {
		t.Errorf("offline engine, 500 asked: %d", got)
	}
	c.RowsInFlight = 100_000
	online := OfflineEngine()
	online.DNS = mxdns.New(mxdns.Config{Server: "127.0.0.1:1"})
	if got := inFlight(online, c); got != 100_000 {
		t.Errorf("engine with DNS: %d rows in flight, want 100000", got)
	}
}

// A VerifyConfig or a limit left zero (tests' managers) gives its
// workers the defaults, but what its zeros mean: no DNS (so no SMTP), SMTP off, no
// verdict kept; the file loads with the strict loader.
func TestWorkerConfigOfZero(t *testing.T) {
	data, err := WorkerConfigOf(VerifyConfig{}, listfile.Limits{MaxRecordBytes: 4096}, "file:///store", "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := cfgv1.Decode(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if lim := LimitsFrom(w); lim.MaxRecordBytes != 4096 || lim.MaxExpansionRatio != listfile.DefaultMaxExpansionRatio {
		t.Errorf("limits %+v: want 4096 and the default ratio", lim)
	}
	got, def := VerifyFrom(w), DefaultVerifyConfig()
	if got.DNSServer != "off" || got.SMTP || got.HistoryTTLs.Deliverable != 0 || got.Probe.HELOName != def.Probe.HELOName ||
		got.RowsInFlight != def.RowsInFlight {
		t.Errorf("%+v", got)
	}
}
