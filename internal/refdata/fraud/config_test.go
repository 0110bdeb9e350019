package fraud

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// Every reason code has an explicit weight in the default file, so the
	// file documents them all.
	for code := range reasonDescriptions {
		if _, ok := c.Weights[code]; !ok {
			t.Errorf("default-config.json has no weight for %s", code)
		}
	}
	if time.Duration(c.Velocity.Window) != 24*time.Hour || c.Threshold <= 0 {
		t.Errorf("window %v threshold %d", time.Duration(c.Velocity.Window), c.Threshold)
	}
}

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tor.txt"), []byte("# exits\n185.220.101.0/24\n\n198.96.155.3 # one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, json string
		err        string
		check      func(t *testing.T, c Config)
	}{
		{name: "empty is default", json: "", check: func(t *testing.T, c Config) {
			if c.Threshold != DefaultConfig().Threshold {
				t.Error("not the default")
			}
		}},
		{name: "partial override merges weights", json: `{"threshold": 70, "weights": {"ip_tor": 55, "email_free": 0}}`,
			check: func(t *testing.T, c Config) {
				d := DefaultConfig()
				if c.Threshold != 70 || c.Weights["ip_tor"] != 55 || c.Weights["email_free"] != 0 ||
					c.Weights["email_disposable"] != d.Weights["email_disposable"] || c.BaseScore != d.BaseScore {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "list file relative to dir", json: `{"ip_list_files": {"tor": ["tor.txt"]}, "ip_lists": {"vpn": ["10.9.0.0/16"]}}`,
			check: func(t *testing.T, c Config) {
				if len(c.ip.tor.v4) != 2 || len(c.ip.vpn.v4) != 1 {
					t.Errorf("tor %v vpn %v", c.ip.tor.v4, c.ip.vpn.v4)
				}
			}},
		{name: "window", json: `{"velocity": {"window": "90m"}}`, check: func(t *testing.T, c Config) {
			if time.Duration(c.Velocity.Window) != 90*time.Minute || c.Velocity.EmailEvents != DefaultConfig().Velocity.EmailEvents {
				t.Errorf("velocity %+v", c.Velocity)
			}
		}},
		{name: "trust model merges", json: `{"network": {"window": "48h"}, "feedback": {"tenant_quota": 10}}`, check: func(t *testing.T, c Config) {
			d := DefaultConfig()
			if time.Duration(c.Network.Window) != 48*time.Hour || c.Network.MinTenants != d.Network.MinTenants ||
				c.Feedback.TenantQuota != 10 || c.Feedback.Horizon != d.Feedback.Horizon {
				t.Errorf("network %+v feedback %+v", c.Network, c.Feedback)
			}
		}},
		{name: "one other tenant alone", json: `{"network": {"min_tenants": 1}}`, err: "network.min_tenants 1"},
		{name: "full below min", json: `{"network": {"full_tenants": 2}}`, err: "network.full_tenants 2"},
		{name: "full beyond the cap", json: `{"network": {"full_tenants": 65}}`, err: "network.full_tenants 65"},
		{name: "no quota", json: `{"feedback": {"tenant_quota": 0}}`, err: "feedback.tenant_quota"},
		{name: "no horizon", json: `{"feedback": {"horizon": "0s"}}`, err: "feedback.horizon"},
		{name: "unknown code", json: `{"weights": {"ip_torr": 5}}`, err: "unknown reason code"},
		{name: "unknown key", json: `{"treshold": 5}`, err: "unknown field"},
		{name: "threshold range", json: `{"threshold": 150}`, err: "threshold"},
		{name: "bad window", json: `{"velocity": {"window": "soon"}}`, err: "duration"},
		{name: "bad cidr", json: `{"ip_lists": {"tor": ["1.2.3.0/33"]}}`, err: "ip_lists.tor"},
		{name: "missing list file", json: `{"ip_list_files": {"vpn": ["nope.txt"]}}`, err: "nope.txt"},
		{name: "bad region", json: `{"default_phone_region": "ZZ"}`, err: "default_phone_region"},
		{name: "longevity order", json: `{"activity": {"longevity_days": [30, 1, 365]}}`, err: "longevity_days"},
		{name: "not json", json: `threshold: 5`, err: "fraud config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.json), dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestHandBuiltConfig(t *testing.T) {
	// New never fails: bad inline entries are dropped, good ones used.
	c := DefaultConfig()
	c.ip = nil
	c.IPLists = IPLists{Tor: []string{"nonsense", "185.220.101.0/24"}}
	s := New(c, Deps{})
	a := s.Assess(context.Background(), testTenant, Input{Email: "a@gmail.com", IP: "185.220.101.9"}, okResult("a@gmail.com"))
	checkCodes(t, a, []string{ReasonIPTor}, nil)
}

func TestWatcherReload(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fraud.json")
	listPath := filepath.Join(dir, "hosting.txt")
	write := func(path, data string) {
		t.Helper()
		// Write a new file and rename it over the old one, as a ConfigMap
		// update swaps files, so the identity changes.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(listPath, "104.131.0.0/16\n")
	write(cfgPath, `{"threshold": 40, "ip_list_files": {"hosting": ["hosting.txt"]}}`)

	s := New(DefaultConfig(), Deps{})
	w := NewWatcher(s, cfgPath, 5*time.Millisecond)
	if err := w.LastError(); err != nil {
		t.Fatal(err)
	}
	if s.Config().Threshold != 40 {
		t.Fatalf("threshold %d after first load", s.Config().Threshold)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	hosting := func(ip string) bool {
		a := s.Assess(context.Background(), testTenant, Input{Email: "a@gmail.com", IP: ip}, okResult("a@gmail.com"))
		return hasCode(a, ReasonIPHosting)
	}
	if !hosting("104.131.1.1") {
		t.Fatal("list file not loaded")
	}

	// A list file change alone is picked up.
	write(listPath, "104.131.0.0/16\n159.203.0.0/16\n")
	waitFor("list reload", func() bool { return hosting("159.203.3.3") })

	// A config change is picked up.
	write(cfgPath, `{"threshold": 65, "ip_list_files": {"hosting": ["hosting.txt"]}}`)
	waitFor("config reload", func() bool { return s.Config().Threshold == 65 })

	// A broken file keeps the last good configuration.
	loads := w.Loads()
	write(cfgPath, `{"threshold": `)
	waitFor("failed reload", func() bool { return w.Loads() > loads })
	if w.LastError() == nil || s.Config().Threshold != 65 {
		t.Fatalf("after bad file: err %v threshold %d", w.LastError(), s.Config().Threshold)
	}
	write(cfgPath, `{"threshold": 30}`)
	waitFor("recovery", func() bool { return s.Config().Threshold == 30 })
	if w.LastError() != nil {
		t.Fatal(w.LastError())
	}
}
