package emaillists

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/simtime"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadExtra(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"disposable.txt":           "\uFEFF# temp mail we saw\nTempMail.Example\r\n\n  burner.example.  \n",
		"free.txt":                 "mail.example # our ISP\n",
		"role.txt":                 "Einkauf\nventas\n",
		"dangerous.txt":            "kill-switch\n",
		"spamtrap-domains.txt":     "trap.example\n",
		"spamtrap-addresses.txt":   "Hidden@Example.org\n",
		"suppressed-addresses.txt": "a#b@example.com\nJohn@Bücher.example\nünïcode@example.com\n",
		"suppressed-domains.txt":   "# none yet\n",
		"unrelated.txt":            "not read\n",
	})
	got, err := LoadExtra(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Extra{
		Disposable:          []string{"tempmail.example", "burner.example"},
		Free:                []string{"mail.example"},
		Role:                []string{"einkauf", "ventas"},
		Dangerous:           []string{"kill-switch"},
		SpamTrapDomains:     []string{"trap.example"},
		SpamTrapAddresses:   []string{"hidden@example.org"},
		SuppressedAddresses: []string{"a#b@example.com", "john@xn--bcher-kva.example", "ünïcode@example.com"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadExtra:\n got %+v\nwant %+v", got, want)
	}
	l := Default().With(got)
	for _, tt := range []struct {
		local, domain string
		want          Class
	}{
		{"x", "sub.tempmail.example", Class{DomainType: DomainDisposable}},
		{"einkauf", "firma.example", Class{DomainType: DomainBiz, Role: true}},
		{"kill-switch", "firma.example", Class{DomainType: DomainBiz, Dangerous: true}},
		{"HIDDEN+1", "example.org", Class{DomainType: DomainBiz, SpamTrap: true}},
		{"john", "xn--bcher-kva.example", Class{DomainType: DomainBiz, Suppressed: true}},
		{"ünïcode", "example.com", Class{DomainType: DomainBiz, Suppressed: true}},
		{"info", "gmail.com", Class{DomainType: DomainFree, Role: true}}, // built-in lists kept
	} {
		if c := l.Classify(tt.local, tt.domain); c != tt.want {
			t.Errorf("Classify(%q, %q) = %+v, want %+v", tt.local, tt.domain, c, tt.want)
		}
	}
}

func TestLoadExtraMissing(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		got, err := LoadExtra(dir)
		if err != nil || !got.empty() {
			t.Errorf("LoadExtra(%s) = %+v, %v", dir, got, err)
		}
	}
}

func TestLoadExtraErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"disposable.txt":           "ok.example\ncom\n*.wild.example\nco.uk\nuser@addr.example\nbad_char.example\n-dash.example\n",
		"free.txt":                 "*.free.example\n",
		"role.txt":                 "sales\ninfo+x\nsales@example.com\nbad local\n",
		"suppressed-addresses.txt": "no-at-sign\nfine@example.com\n\"quoted\"@example.com\nx@\n",
	})
	got, err := LoadExtra(dir)
	if err == nil {
		t.Fatal("no error")
	}
	wantLines := []string{
		"disposable.txt:2: want a domain with at least two labels",
		"disposable.txt:3: wildcards are not supported; subdomains of a listed domain match already",
		"disposable.txt:4: an ICANN public suffix",
		"disposable.txt:5: want a domain such as \"example.com\", not an address",
		"disposable.txt:6: character '_' not allowed in a domain",
		"disposable.txt:7: label starts or ends with '-'",
		"free.txt:1: wildcards are not supported; a free domain covers",
		"role.txt:2: local parts are matched without their +tag",
		"role.txt:3: want a local part such as \"sales\", not an address",
		"role.txt:4: character ' ' not allowed in a local part",
		"suppressed-addresses.txt:1: want an address local@domain",
		"suppressed-addresses.txt:3: character '\"' not allowed in a local part",
		"suppressed-addresses.txt:4: empty domain",
	}
	msg := err.Error()
	for _, w := range wantLines {
		if !strings.Contains(msg, filepath.Join(dir, w)) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != len(wantLines) {
		t.Errorf("%d errors, want %d:\n%s", n, len(wantLines), msg)
	}
	var ee *EntryError
	if !errors.As(err, &ee) || ee.Line == 0 || ee.File == "" {
		t.Errorf("no *EntryError in %v", err)
	}
	// valid entries are still returned
	if !reflect.DeepEqual(got.Disposable, []string{"ok.example"}) || !reflect.DeepEqual(got.Role, []string{"sales"}) ||
		!reflect.DeepEqual(got.SuppressedAddresses, []string{"fine@example.com"}) {
		t.Errorf("valid entries: %+v", got)
	}
}

func TestLoadExtraErrorCap(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"role.txt": strings.Repeat("a b\n", 50)})
	_, err := LoadExtra(dir)
	if err == nil || !strings.Contains(err.Error(), "30 more malformed entries") {
		t.Errorf("err = %v", err)
	}
}

func TestExtraValidate(t *testing.T) {
	if err := (Extra{Free: []string{"gmail.com"}, Role: []string{"Sales"}}).Validate(); err != nil {
		t.Errorf("valid: %v", err)
	}
	err := (Extra{Free: []string{"gmail.com", "com"}}).Validate()
	if err == nil || !strings.Contains(err.Error(), "Free:2:") {
		t.Errorf("err = %v", err)
	}
}

// configMap lays out dir like a kubelet ConfigMap volume: dir/NAME ->
// ..data/NAME, ..data -> ..VERSION, swapped atomically on update.
func configMap(t *testing.T, dir, version string, files map[string]string) {
	t.Helper()
	vdir := filepath.Join(dir, "..ver"+version)
	if err := os.Mkdir(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, vdir, files)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink("..ver"+version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range extraFiles {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatcher runs in a synctest bubble: each change is seen at the next
// poll (5ms on the bubble's clock), exactly.
func TestWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 5 * time.Millisecond
		dir := t.TempDir()
		configMap(t, dir, "1", map[string]string{"suppressed-addresses.txt": "old@example.com\n"})
		base := testLists()
		w := NewWatcher(base, dir, every)
		if err := w.LastError(); err != nil {
			t.Fatal(err)
		}
		if !w.Lists().Classify("old", "example.com").Suppressed {
			t.Fatal("initial load not applied")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()

		// readers run concurrently with reloads (go test -race): every
		// 100µs, so at each poll's instant too
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Microsecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					w.Lists().Classify("old", "example.com")
				}
			}
		})

		// seen checks, one poll after a change, that it was seen
		seen := func(what string, cond func() bool) {
			t.Helper()
			simtime.Advance(every)
			if !cond() {
				t.Fatalf("%s not seen at the next poll", what)
			}
		}

		// update: same size and, possibly, same mtime; the symlink swap is seen
		configMap(t, dir, "2", map[string]string{"suppressed-addresses.txt": "new@example.com\n"})
		seen("update", func() bool {
			l := w.Lists()
			return l.Classify("new", "example.com").Suppressed && !l.Classify("old", "example.com").Suppressed
		})

		// a malformed update is not published; the last good snapshot stays
		good := w.Lists()
		configMap(t, dir, "3", map[string]string{"suppressed-addresses.txt": "broken\n"})
		seen("error", func() bool { return w.LastError() != nil })
		if w.Lists() != good {
			t.Error("malformed update published")
		}
		if !strings.Contains(w.LastError().Error(), "suppressed-addresses.txt:1:") {
			t.Errorf("LastError = %v", w.LastError())
		}

		// fixing it recovers; removing every file goes back to base
		configMap(t, dir, "4", map[string]string{"spamtrap-domains.txt": "trap2.example\n"})
		seen("recovery", func() bool { return w.LastError() == nil && w.Lists().Classify("x", "trap2.example").SpamTrap })
		configMap(t, dir, "5", nil)
		seen("empty", func() bool { return w.Lists() == base })

		loads := w.Loads()
		simtime.Advance(6 * every)
		if w.Loads() != loads {
			t.Errorf("reloaded without a change: %d -> %d loads", loads, w.Loads())
		}

		close(stop)
		wg.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestWatcherMissingDir(t *testing.T) {
	base := testLists()
	w := NewWatcher(base, filepath.Join(t.TempDir(), "absent"), 0)
	if w.Lists() != base || w.LastError() != nil {
		t.Errorf("missing dir: %v", w.LastError())
	}
}
