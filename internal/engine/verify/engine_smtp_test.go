package verify_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// truthCodes maps the mail world's ground truth to the code the engine
// must give.
var truthCodes = map[string]verify.Code{
	mailworld.TruthDeliverable: verify.CodeDeliverable,
	mailworld.TruthMissing:     verify.CodeMailboxNotFound,
	mailworld.TruthFull:        verify.CodeMailboxFull,
	mailworld.TruthCatchAll:    verify.CodeCatchAll,
	mailworld.TruthNXDomain:    verify.CodeDomainNotFound,
	mailworld.TruthNoAddress:   verify.CodeDomainNoIP,
	mailworld.TruthNullMX:      verify.CodeDomainNoMail,
	mailworld.TruthPolicy:      verify.CodeMailNotAccepted,
	mailworld.TruthUnconfirmed: verify.CodeValidDomain,
	mailworld.TruthGreylisted:  verify.CodeDeliverable, // retried within the budget
	mailworld.TruthTimeout:     verify.CodeTimeout,     // a tarpit host: no host ever answered
}

// smtpWorld starts a mail world on an in-memory network, in the test's
// synctest bubble, and an engine that verifies against it. When the test
// ends it checks that DATA was never sent, once the bubble's clock ran
// until the work left behind (idle sessions) was done.
func smtpWorld(t *testing.T) (*mailworld.World, *verify.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := memnet.New()
	w, err := mailworld.Start(ctx, []mailworld.Domain{
		{Name: "corp.test", Mailboxes: map[string]mailworld.Behaviour{"john": mailworld.Exists, "full": mailworld.Full}},
		{Name: "catchall.test", DefaultBehaviour: mailworld.CatchAll},
		{Name: "strict.test", PolicyReject: true},
		{Name: "grey.test", Mailboxes: map[string]mailworld.Behaviour{"late": mailworld.Exists}, Greylist: 200 * time.Millisecond},
		{Name: "backup.test", Mailboxes: map[string]mailworld.Behaviour{"someone": mailworld.Exists}, PrimaryDown: true},
		{Name: "picky.test", Mailboxes: map[string]mailworld.Behaviour{"ann": mailworld.Exists}, SecondRCPT452: true},
		{Name: "tarpit.test", Tarpit: true},
		{Name: "gone.test", NXDomain: true},
		{Name: "nullmx.test", NullMX: true},
	}, mailworld.Options{Network: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if st := w.Stats(); st.DATA != 0 {
			t.Errorf("DATA sent %d times; the verifier must never send DATA", st.DATA)
		}
		_ = w.Close()
	})
	t.Cleanup(func() { simtime.Advance(time.Hour) })
	e := &verify.Engine{
		Lists:     emaillists.Default,
		Typos:     typo.Default(),
		DNS:       mxdns.New(mxdns.Config{Server: w.DNSAddr(), Timeout: time.Second, Dial: n.DialContext}),
		ExtraTLDs: map[string]bool{"test": true},
		SMTP: smtpprobe.New(smtpprobe.Config{
			Port: w.SMTPPort(), HELOName: "verify.test", MailFrom: "probe@verify.test",
			ConnectTimeout: 300 * time.Millisecond, GreetingTimeout: 500 * time.Millisecond, CommandTimeout: 500 * time.Millisecond,
			GreylistRetry: 250 * time.Millisecond, MaxConnsPerHost: 2, RatePerHost: 100,
			Dialer: n.DialContext,
		}),
	}
	return w, e
}

// TestEngineSMTP: every mailbox outcome, single and batch, against the
// mail world; DATA is never sent.
func TestEngineSMTP(t *testing.T) {
	addrs := []string{
		"john@corp.test", "nobody@corp.test", "full@corp.test", "anyone@catchall.test",
		"x@strict.test", "late@grey.test", "someone@backup.test", "ann@picky.test", "bob@picky.test",
		"x@tarpit.test", "x@gone.test", "x@nullmx.test",
	}
	for _, a := range addrs {
		t.Run("single/"+a, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, e := smtpWorld(t)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				r := e.Verify(ctx, a, verify.Options{SMTP: true})
				want := truthCodes[w.GroundTruth(a)]
				if r.Code != want {
					t.Errorf("%s: code %d (%s), want %d for ground truth %q", a, r.Code, r.Code, want, w.GroundTruth(a))
				}
			})
		})
	}
	t.Run("batch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w, e := smtpWorld(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := make([]verify.Result, len(addrs))
			if err := e.VerifyBatch(ctx, addrs, res, verify.Options{SMTP: true}); err != nil {
				t.Fatal(err)
			}
			for i, a := range addrs {
				if want := truthCodes[w.GroundTruth(a)]; res[i].Code != want {
					t.Errorf("%s: code %d, want %d", a, res[i].Code, want)
				}
			}
		})
	})
}

// TestEngineSMTPDeadline: a tarpit with the caller's own deadline expiring
// gives 5 (unknown), not 20, at the deadline.
func TestEngineSMTPDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, e := smtpWorld(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		r := e.Verify(ctx, "x@tarpit.test", verify.Options{SMTP: true})
		if r.Code != verify.CodeTimeout || time.Since(start) != 200*time.Millisecond {
			t.Fatalf("code %d after %v, want 5 at the 200ms deadline", r.Code, time.Since(start))
		}
	})
}
