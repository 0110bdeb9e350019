package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	emailverifier "github.com/AfterShip/email-verifier"

	"github.com/emaildata/emaildata/internal/emaillists"
	"github.com/emaildata/emaildata/internal/mxdns"
	"github.com/emaildata/emaildata/internal/smtpprobe"
	"github.com/emaildata/emaildata/internal/typo"
	"github.com/emaildata/emaildata/internal/verify"
)

// Predicted categories besides the mail world's Truth* names.
const (
	predNoMail = "nomail" // AfterShip: the domain has no usable MX (it cannot tell NXDOMAIN, no address and null MX apart)
	predOther  = "other"
)

// settings shared by the runs.
type settings struct {
	concurrency   int
	port          int
	greylistRetry time.Duration
	greyRetries   int
	singleTimeout time.Duration
}

// runAfterShip verifies every address with AfterShip's Verify, from a
// worker pool of s.concurrency goroutines, and returns the predicted
// category per address plus a short note of the raw answer.
func runAfterShip(addrs []string, s settings) (pred, raw []string) {
	v := emailverifier.NewVerifier().
		EnableSMTPCheck().             // off by default
		DisableAutoUpdateDisposable(). // never enabled here: no download of the disposable list
		DisableGravatarCheck().        // default; would call gravatar.com
		DisableDomainSuggest().        // default
		HelloName("verify.test").
		FromEmail("probe@verify.test")
	// Catch-all detection is on by default; connect and operation timeouts
	// keep their defaults (10 s each). No API verifier (Yahoo) is enabled.
	pred = make([]string, len(addrs))
	raw = make([]string, len(addrs))
	pool(len(addrs), s.concurrency, func(i int) {
		res, err := v.Verify(addrs[i])
		pred[i], raw[i] = classifyAfterShip(res, err)
	})
	return pred, raw
}

// classifyAfterShip maps one AfterShip answer to a category (see the
// mapping table in docs/benchmarks.md).
func classifyAfterShip(res *emailverifier.Result, err error) (string, string) {
	if res == nil {
		return predOther, "nil result"
	}
	if !res.Syntax.Valid {
		return mailworldInvalid, "syntax invalid"
	}
	if res.Disposable {
		return predOther, "disposable"
	}
	if err != nil {
		var le *emailverifier.LookupError
		if errors.As(err, &le) && le != nil {
			switch le.Message {
			case emailverifier.ErrTimeout:
				return truthTimeout, "smtp error: timeout"
			case emailverifier.ErrNoSuchHost:
				return predNoMail, "smtp error: no such host (mx=" + strconv.FormatBool(res.HasMxRecords) + ")"
			}
			return truthUnconfirmed, "smtp error: " + le.Message
		}
		if !res.HasMxRecords {
			// net.LookupMX failed: NXDOMAIN and "no MX record" look alike.
			return predNoMail, "mx lookup error"
		}
		return truthUnconfirmed, "error: " + err.Error()
	}
	if !res.HasMxRecords {
		return predNoMail, "no mx"
	}
	sm := res.SMTP
	if sm == nil {
		return predOther, "no smtp result"
	}
	switch {
	case res.Reachable == "yes":
		return truthDeliverable, "reachable=yes"
	case sm.CatchAll:
		return truthCatchAll, "reachable=" + res.Reachable + " catch_all"
	case sm.FullInbox:
		return truthFull, "reachable=" + res.Reachable + " full_inbox"
	case res.Reachable == "no":
		return truthMissing, "reachable=no"
	}
	return truthUnconfirmed, "reachable=" + res.Reachable
}

// newEngine builds our engine the way internal/catalog.NewEngine does for
// production (lists, typos, mxdns, smtpprobe with the default timeouts and
// per-host limits), pointed at the world's DNS server and SMTP port.
func newEngine(dnsAddr string, s settings) (*verify.Engine, *smtpprobe.Prober) {
	p := smtpprobe.New(smtpprobe.Config{
		Port: s.port, HELOName: "verify.test", MailFrom: "probe@verify.test",
		MaxConnsPerHost: 2, RatePerHost: 5, // production defaults (catalog.DefaultVerifyConfig)
		GreylistRetry: s.greylistRetry, MaxGreylistRetries: s.greyRetries,
		// ConnectTimeout 5 s and CommandTimeout 10 s: the defaults.
	})
	e := &verify.Engine{
		Lists:         emaillists.Default,
		Typos:         typo.Default(),
		DNS:           mxdns.New(mxdns.Config{Server: dnsAddr, Timeout: 2 * time.Second}),
		SMTP:          p,
		DomainWorkers: s.concurrency,
		ExtraTLDs:     map[string]bool{"test": true},
	}
	return e, p
}

// runOursBatch is the list worker's path: VerifyBatch over chunks of the
// email_validation service's batch size (batchRows, 10,000 like the worker),
// one chunk after the other, with no deadline (internal/pipeline's shard
// loop and internal/evlist).
func runOursBatch(dnsAddr string, addrs []string, s settings) (pred, raw []string, st smtpprobe.Stats, chunks []time.Duration) {
	e, p := newEngine(dnsAddr, s)
	res := make([]verify.Result, len(addrs))
	ctx := context.Background()
	for i := 0; i < len(addrs); i += batchRows {
		j := min(i+batchRows, len(addrs))
		t0 := time.Now()
		_ = e.VerifyBatch(ctx, addrs[i:j], res[i:j], verify.Options{SMTP: true})
		chunks = append(chunks, time.Since(t0))
	}
	pred, raw = classifyOurs(res)
	return pred, raw, p.Stats(), chunks
}

// runOursSingle is the API's path: Verify per address within a deadline
// (GET /v5/ev defaults to 10 s), from a worker pool.
func runOursSingle(dnsAddr string, addrs []string, s settings) (pred, raw []string, st smtpprobe.Stats) {
	e, p := newEngine(dnsAddr, s)
	res := make([]verify.Result, len(addrs))
	pool(len(addrs), s.concurrency, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), s.singleTimeout)
		res[i] = e.Verify(ctx, addrs[i], verify.Options{SMTP: true})
		cancel()
	})
	pred, raw = classifyOurs(res)
	return pred, raw, p.Stats()
}

var codeCategory = map[verify.Code]string{
	verify.CodeDeliverable:     truthDeliverable,
	verify.CodeCatchAll:        truthCatchAll,
	verify.CodeMailboxNotFound: truthMissing,
	verify.CodeMailboxFull:     truthFull,
	verify.CodeMailNotAccepted: truthPolicy,
	verify.CodeDomainNotFound:  truthNXDomain,
	verify.CodeDomainNoIP:      truthNoAddress,
	verify.CodeDomainNoMail:    truthNullMX,
	verify.CodeValidDomain:     truthUnconfirmed,
	verify.CodeTimeout:         truthTimeout,
}

func classifyOurs(res []verify.Result) (pred, raw []string) {
	pred = make([]string, len(res))
	raw = make([]string, len(res))
	for i, r := range res {
		raw[i] = strconv.Itoa(int(r.Code)) + " " + r.Code.String()
		if c, ok := codeCategory[r.Code]; ok {
			pred[i] = c
		} else if r.Status == verify.StatusInvalid || r.Status == verify.StatusTrap {
			pred[i] = predRejectOther
		} else {
			pred[i] = predOther
		}
	}
	return pred, raw
}

// predRejectOther: our engine rejected the address before the network
// stages (lists, typos, syntax).
const predRejectOther = "rejected-offline"

func pool(n, workers int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// batchRows is the list worker's batch size for email_validation
// (evlist's default); set with -batch.
var batchRows = 10_000
