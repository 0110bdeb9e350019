package operator

import (
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/wiring"
)

// With a fleet backend, Job pods get each host's whole budget and must
// have the backend; without one they divide it; a password stays out of
// their configuration.
func TestSMTPBudgetFollowsFleet(t *testing.T) {
	for _, tc := range []struct {
		name, url    string
		want         controllers.SMTPBudget
		required     bool
		urlInFile    bool
		smtp, dnsOff bool
	}{
		{name: "no backend: divided", want: controllers.SMTPBudget{Conns: 2, Rate: 5}, smtp: true},
		{name: "backend: shared", url: "redis://127.0.0.1:6379/0", want: controllers.SMTPBudget{Conns: 2, Rate: 5, Shared: true}, required: true, urlInFile: true, smtp: true},
		{name: "backend with a password", url: "redis://:pw@redis:6379/0", want: controllers.SMTPBudget{Conns: 2, Rate: 5, Shared: true}, required: true, smtp: true},
		{name: "no SMTP stage: no budget", url: "redis://127.0.0.1:6379/0", urlInFile: true},
		{name: "no DNS: no budget", url: "redis://127.0.0.1:6379/0", urlInFile: true, smtp: true, dnsOff: true},
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
			// The workers' configuration holds the backend unless its URL
			// has a password (then the workers' Secret gives it), never a
			// password; the pods must have the backend when it is shared.
			data, err := wiring.WorkerConfigOf(o.Verify, wiring.LimitsFrom(cfgv1.Default()), "file:///store", "")
			if err != nil {
				t.Fatal(err)
			}
			w, err := cfgv1.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := o.Verify.Fleet.Required; got != tc.required {
				t.Errorf("fleet required %v, want %v", got, tc.required)
			}
			if inFile := w.Fleet.URL != ""; inFile != tc.urlInFile {
				t.Errorf("fleet.url in the workers' configuration: %v, want %v", inFile, tc.urlInFile)
			}
			if strings.Contains(string(data), ":pw@") {
				t.Error("a password in the workers' configuration")
			}
		})
	}
}
