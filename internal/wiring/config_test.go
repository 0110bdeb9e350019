package wiring

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/evlist"
)

// Args renders every flag but the manager's own, and a worker parsing
// them gets the same configuration.
func TestArgsRoundTrip(t *testing.T) {
	c := DefaultVerifyConfig()
	c.DNSServer, c.Probe.GreylistRetry, c.Probe.MaxSessions = "10.0.0.10:53", 90*time.Second, 300
	c.Probe.GreetingTimeout, c.Probe.PipelineDepth, c.RowsInFlight = 45*time.Second, 4, 50_000
	c.Proxies = StringList{"socks5://u:p@10.1.0.1:1080", "socks5://10.1.0.2:1080"}
	c.ListsDir, c.ListsBlobKey, c.ExtraTLDs = "/etc/emaildata/lists", "system/lists.json", "test"
	c.Fleet.URL, c.HistoryURL, c.Fleet.Seat, c.Fleet.Seats = "redis://10.0.0.5:6379/2", "postgres://history@10.0.0.6/ev", 3, 8
	c.HistoryTTLs.CatchAll = 12 * time.Hour
	c.HistoryScope, c.HistoryKeyFile, c.HistoryKeyCheck = "shared", "/etc/emaildata/history/HISTORY_KEY", 30*time.Second
	args := c.Args()
	for _, a := range args {
		if strings.HasPrefix(a, "--lists-dir") || strings.HasPrefix(a, "--fleet-seat") || strings.HasPrefix(a, "--history-key-file") {
			t.Fatalf("manager-only flag passed on: %s", a)
		}
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var got VerifyConfig
	got.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c.ListsDir, c.HistoryKeyFile = "", ""
	c.Fleet.Seat, c.Fleet.Seats = got.Fleet.Seat, got.Fleet.Seats // the Job's own
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if len(args) != len(names)-len(managerOnly) {
		t.Fatalf("%d args for %d flags", len(args), len(names))
	}
}

// URLs with passwords never go into Job args: workers read them from
// their environment (--worker-env-secret).
func TestArgsOmitPasswords(t *testing.T) {
	c := DefaultVerifyConfig()
	c.Fleet.URL, c.HistoryURL = "redis://:s3cret@10.0.0.5:6379/2", "postgres://u:pw@10.0.0.6/ev"
	for _, a := range c.Args() {
		if strings.Contains(a, "s3cret") || strings.Contains(a, "pw@") {
			t.Errorf("a password in the args: %s", a)
		}
	}
	if got := c.OmittedArgs(); !slices.Equal(got, []string{"fleet-url", "history-url"}) {
		t.Errorf("OmittedArgs = %v", got)
	}
	c.Fleet.URL = "redis://10.0.0.5:6379/2"
	if !slices.Contains(c.Args(), "--fleet-url=redis://10.0.0.5:6379/2") {
		t.Error("a URL without a password left out")
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

// The binaries' flags start from the prober's own defaults: with no flag
// given, the prober they build is configured exactly as smtpprobe.New
// configures a zero Config, but for the EHLO name and the sender.
func TestProberDefaultsAreSMTPProbes(t *testing.T) {
	c := DefaultVerifyConfig()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
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

// docs/verification.md's table of the verification flags restates their
// defaults for lists and for the API: each must be what the binaries start with.
func TestREADMEFlagDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "verification.md"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := func(c VerifyConfig) map[string]string {
		fs := flag.NewFlagSet("defaults", flag.ContinueOnError)
		c.BindFlags(fs)
		out := map[string]string{}
		fs.VisitAll(func(f *flag.Flag) { out[f.Name] = f.DefValue })
		return out
	}
	lists, api := defaults(DefaultVerifyConfig()), defaults(DefaultAPIVerifyConfig())
	checked := 0
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--smtp-") && !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--dns-") {
			continue
		}
		flags := strings.Split(strings.TrimSpace(cells[1]), ", ")
		for col, want := range map[int]map[string]string{2: lists, 3: api} {
			vals := strings.Split(strings.TrimSpace(cells[col]), ", ")
			if len(vals) != len(flags) {
				continue // an empty cell: not that binary's flag
			}
			for i, f := range flags {
				name := strings.Trim(f, "`-")
				def, ok := want[name]
				if !ok {
					t.Errorf("docs/verification.md names %s, which is no flag", f)
					continue
				}
				checked++
				if !sameDefault(vals[i], def) {
					t.Errorf("docs/verification.md: %s defaults to %s (column %d), the flag to %q", f, vals[i], col, def)
				}
			}
		}
	}
	if checked < 20 {
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
