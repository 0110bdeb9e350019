package operator

import (
	"slices"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/wiring"
)

// With a fleet backend, Job pods get each host's whole budget and must
// have the backend; without one they divide it; a password stays out of
// their args.
func TestSMTPBudgetFollowsFleet(t *testing.T) {
	for _, tc := range []struct {
		name, url    string
		want         controllers.SMTPBudget
		required     bool
		urlInArgs    bool
		smtp, dnsOff bool
	}{
		{name: "no backend: divided", want: controllers.SMTPBudget{Conns: 2, Rate: 5}, smtp: true},
		{name: "backend: shared", url: "redis://127.0.0.1:6379/0", want: controllers.SMTPBudget{Conns: 2, Rate: 5, Shared: true}, required: true, urlInArgs: true, smtp: true},
		{name: "backend with a password", url: "redis://:pw@redis:6379/0", want: controllers.SMTPBudget{Conns: 2, Rate: 5, Shared: true}, required: true, smtp: true},
		{name: "no SMTP stage: no budget", url: "redis://127.0.0.1:6379/0", urlInArgs: true},
		{name: "no DNS: no budget", url: "redis://127.0.0.1:6379/0", urlInArgs: true, smtp: true, dnsOff: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{Verify: wiring.DefaultVerifyConfig()}
			o.Verify.Fleet.URL, o.Verify.SMTP = tc.url, tc.smtp
			if tc.dnsOff {
				o.Verify.DNSServer = "off"
			}
			setSMTPBudget(o)
			if o.Job.SMTPBudget != tc.want {
				t.Errorf("budget %+v, want %+v", o.Job.SMTPBudget, tc.want)
			}
			args := o.Verify.Args()
			if got := slices.Contains(args, "--fleet-required=true"); got != tc.required {
				t.Errorf("--fleet-required=true in args: %v, want %v (%v)", got, tc.required, args)
			}
			inArgs := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--fleet-url=") && a != "--fleet-url=" })
			if inArgs != tc.urlInArgs {
				t.Errorf("--fleet-url in args: %v, want %v", inArgs, tc.urlInArgs)
			}
			if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, ":pw@") }) {
				t.Error("a password in the Job args")
			}
		})
	}
}
