package wiring

import (
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestWorkerConfig: the configuration Jobs read by reference holds no
// password, loads with the strict loader, and brings the manager's
// settings to the worker.
func TestWorkerConfig(t *testing.T) {
	c := cfgv1.Default()
	c.Fleet.URL = "redis://:hunter2@redis:6379/0"
	c.Verification.History.URL = "redis://history:6379/1"
	c.Verification.Proxies.URLs = []string{"socks5://u:pw@p1:1080", "socks5://p2:1080"}
	c.Verification.SMTP.HELOName = "mx.example.org"
	c.Verification.History.KeyFile = "/etc/key"
	out, err := WorkerConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") || strings.Contains(string(out), "pw@") || strings.Contains(string(out), "/etc/key") {
		t.Fatalf("a secret or a manager-only setting in the worker configuration:\n%s", out)
	}
	w, err := cfgv1.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if w.Verification.SMTP.HELOName != "mx.example.org" || w.Verification.History.URL != "redis://history:6379/1" ||
		len(w.Verification.Proxies.URLs) != 1 || w.Fleet.URL != "" {
		t.Errorf("worker configuration %+v", w.Verification)
	}
}

func TestApplyJobEnv(t *testing.T) {
	t.Setenv(EnvFleetSeats, "12")
	t.Setenv(EnvSMTPConns, "1")
	t.Setenv(EnvSMTPRate, "2.5")
	t.Setenv(EnvFleetRequired, "true")
	c := cfgv1.Default()
	c.Verification.ListsDir = "/etc/emaildata/lists"
	vc := VerifyFrom(c)
	if err := ApplyJobEnv(&vc, c); err != nil {
		t.Fatal(err)
	}
	if vc.Fleet.Seats != 12 || vc.Probe.MaxConnsPerHost != 1 || vc.Probe.RatePerHost != 2.5 || !vc.Fleet.Required ||
		vc.ListsDir != "" || vc.ListsBlobKey != ListsBlobKey {
		t.Errorf("%+v", vc)
	}
	t.Setenv(EnvSMTPConns, "many")
	if err := ApplyJobEnv(&vc, c); err == nil {
		t.Error("a bad value was taken")
	}
}
