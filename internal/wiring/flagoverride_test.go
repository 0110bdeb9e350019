package wiring

import (
	"flag"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// TestApplyFlags: the flags given land in the fields the migration table
// names, so --print-config shows what the process runs with.
func TestApplyFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		api     bool
		check   func(*cfgv1.Configuration) bool
		wantErr bool
		skipped int
	}{
		{name: "string", args: []string{"--smtp-helo", "mx.example.org"},
			check: func(c *cfgv1.Configuration) bool { return c.Verification.SMTP.HELOName == "mx.example.org" }},
		{name: "duration and int", args: []string{"--smtp-connect-timeout=7s", "--smtp-max-sessions=12"},
			check: func(c *cfgv1.Configuration) bool {
				return c.Verification.SMTP.ConnectTimeout.Duration == 7*time.Second && c.Verification.SMTP.MaxSessions == 12
			}},
		{name: "the API's timeouts are the interactive ones", args: []string{"--smtp-connect-timeout=3s"}, api: true,
			check: func(c *cfgv1.Configuration) bool {
				return c.Verification.Interactive.ConnectTimeout.Duration == 3*time.Second &&
					c.Verification.SMTP.ConnectTimeout == cfgv1.Default().Verification.SMTP.ConnectTimeout
			}},
		{name: "list", args: []string{"--smtp-allow-cidrs=10.0.0.0/8, 192.168.0.0/16"},
			check: func(c *cfgv1.Configuration) bool { return len(c.Verification.SMTP.AllowCIDRs) == 2 }},
		{name: "a string that reads as a number stays a string", args: []string{"--smtp-mail-from=123"},
			check: func(c *cfgv1.Configuration) bool { return c.Verification.SMTP.MailFrom == "123" }},
		{name: "a flag the configuration refuses", args: []string{"--dns-workers=0"}, wantErr: true},
		{name: "flags without a field are reported", args: []string{"--fleet-seat=2"}, skipped: 1,
			check: func(c *cfgv1.Configuration) bool { return true }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfgv1.Default()
			vc := VerifyFrom(c)
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			vc.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			skipped, err := ApplyFlags(c, fs, tc.api)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(skipped) != tc.skipped {
				t.Errorf("skipped %v, want %d", skipped, tc.skipped)
			}
			if !tc.check(c) {
				t.Errorf("%v not applied", tc.args)
			}
		})
	}
}
