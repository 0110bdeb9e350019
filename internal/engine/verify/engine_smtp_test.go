package verify_test

import (
	"context"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
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

func smtpWorld(t *testing.T) (*mailworld.World, *verify.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
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
	}, mailworld.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	e := &verify.Engine{
		Lists:     emaillists.Default,
		Typos:     typo.Default(),
		DNS:       mxdns.New(mxdns.Config{Server: w.DNSAddr(), Timeout: time.Second}),
		ExtraTLDs: map[string]bool{"test": true},
		SMTP: smtpprobe.New(smtpprobe.Config{
			Port: w.SMTPPort(), HELOName: "verify.test", MailFrom: "probe@verify.test",
			ConnectTimeout: 300 * time.Millisecond, GreetingTimeout: 500 * time.Millisecond, CommandTimeout: 500 * time.Millisecond,
			GreylistRetry: 250 * time.Millisecond, MaxConnsPerHost: 2, RatePerHost: 100,
		}),
	}
	return w, e
}

// TestEngineSMTP: every mailbox outcome, single and batch, against the
// loopback mail world; DATA is never sent.
func TestEngineSMTP(t *testing.T) {
	w, e := smtpWorld(t)
	addrs := []string{
		"john@corp.test", "nobody@corp.test", "full@corp.test", "anyone@catchall.test",
		"x@strict.test", "late@grey.test", "someone@backup.test", "ann@picky.test", "bob@picky.test",
		"x@tarpit.test", "x@gone.test", "x@nullmx.test",
	}
	for _, a := range addrs {
		t.Run("single/"+a, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r := e.Verify(ctx, a, verify.Options{SMTP: true})
			want := truthCodes[w.GroundTruth(a)]
			if r.Code != want {
				t.Errorf("%s: code %d (%s), want %d for ground truth %q", a, r.Code, r.Code, want, w.GroundTruth(a))
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
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
	if st := w.Stats(); st.DATA != 0 {
		t.Errorf("DATA sent %d times; the verifier must never send DATA", st.DATA)
	}
}

// TestEngineSMTPDeadline: a tarpit with the caller's own deadline expiring
// gives 5 (unknown), not 20.
func TestEngineSMTPDeadline(t *testing.T) {
	_, e := smtpWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := e.Verify(ctx, "x@tarpit.test", verify.Options{SMTP: true})
	if r.Code != verify.CodeTimeout {
		t.Fatalf("code %d, want 5", r.Code)
	}
}
