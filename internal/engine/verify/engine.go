package verify

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/typo"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Options are per-call choices.
type Options struct {
	// SMTP runs the mailbox check after the domain check.
	SMTP bool
	// MaxAge is the oldest verdict from the history the caller accepts
	// instead of a probe: nil, any the history still keeps; 0, none
	// (every address is probed). New verdicts are recorded either way.
	MaxAge *time.Duration
	// Tenant is whose call this is, for the history: an identity from
	// evhistory (APITenant, NamespaceTenant, LocalTenant). In the
	// history's tenant scope, a call is answered only from its tenant's
	// own earlier checks, and one without a tenant neither reads nor
	// writes the history.
	Tenant string
}

// Resolver finds a domain's mail hosts; *mxdns.Resolver implements it.
type Resolver interface {
	Lookup(ctx context.Context, domain string) (mxdns.Result, error)
}

// MailboxChecker runs the SMTP stage for addresses of one domain whose mail
// hosts are known. out[i] receives the code for addrs[i]: one of
// CodeDeliverable, CodeCatchAll, CodeMailboxNotFound, CodeMailboxFull,
// CodeMailNotAccepted, CodeValidDomain (unconfirmed) or CodeTimeout.
type MailboxChecker interface {
	CheckMailboxes(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []Code) error
}

// Engine runs every stage: syntax, corrections, lists, DNS and SMTP. One
// engine serves GET /v5/ev (Verify) and the email_validation list service
// (VerifyBatch). Nil stages are skipped.
type Engine struct {
	// Lists returns the current classification lists (they may reload).
	Lists func() *emaillists.Lists
	// Typos suggests corrections.
	Typos *typo.Corrector
	// DNS resolves domains; nil stops at syntax and lists (code 10).
	DNS Resolver
	// SMTP checks mailboxes; nil stops at the domain check (code 20).
	SMTP MailboxChecker
	// DomainWorkers bounds concurrent domains in a batch (default 32).
	DomainWorkers int
	// ExtraTLDs are accepted although they are not ICANN top-level domains:
	// internal names of air-gapped clusters, or "test" for test worlds.
	ExtraTLDs map[string]bool
	// History, when set, answers mailboxes whose verdict is fresh enough
	// (Options.MaxAge) without DNS or SMTP, and keeps the SMTP stage's
	// verdicts.
	History History
	// Reporters are parts with work counters of their own (the history,
	// the fleet backend), reported with the engine's.
	Reporters []Reporter
	// Clock dates new verdicts (nil: the wall clock); the wiring gives
	// the process's.
	Clock clock.Clock
	// Now, when set, reads the time instead of Clock: tests move it
	// without a bubble.
	Now func() time.Time
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return clock.Or(e.Clock).Now()
}

// Reporter has cumulative work counters, named for reports and metrics.
type Reporter interface {
	Counters() map[string]float64
}

// Verify checks one address within ctx's deadline. When the deadline
// expires before a verdict, the code is CodeTimeout.
func (e *Engine) Verify(ctx context.Context, address string, o Options) Result {
	r := e.verify(ctx, address, o)
	finish(&r)
	return r
}

func (e *Engine) verify(ctx context.Context, address string, o Options) Result {
	res := []Result{e.offline(address)}
	r := &res[0]
	if final(r.Code) {
		return *r
	}
	if !r.typo && len(e.fromHistory(ctx, []int{0}, res, o)) == 0 {
		return *r
	}
	mx, ok := e.domain(ctx, r)
	if !ok || !o.SMTP || e.SMTP == nil {
		return *r
	}
	codes, deferred := []Code{CodeValidDomain}, []bool{false}
	if err := e.checkMailboxes(ctx, r.Domain, mx, []string{mailbox(*r)}, codes, deferred); err != nil && ctx.Err() != nil {
		r.SetCode(CodeTimeout)
		return *r
	}
	e.applySMTP(r, codes[0], deferred[0])
	e.record(ctx, []int{0}, res, o)
	return *r
}

// checkMailboxes runs the SMTP stage synchronously, with the deferrals
// when the checker reports them.
func (e *Engine) checkMailboxes(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []Code, deferred []bool) error {
	if d, ok := e.SMTP.(DeferralReporter); ok {
		wait, err := d.StartMailboxVerdicts(ctx, domain, mx, addrs, out, deferred)
		if err != nil {
			return err
		}
		return wait()
	}
	err := e.SMTP.CheckMailboxes(ctx, domain, mx, addrs, out)
	unknownDeferrals(out, deferred)
	return err
}

// unknownDeferrals marks every unconfirmed verdict of a checker that does
// not say which were deferrals as one: never kept.
func unknownDeferrals(out []Code, deferred []bool) {
	for i, c := range out {
		deferred[i] = c == CodeValidDomain
	}
}

// AsyncMailboxChecker is a MailboxChecker that can queue a domain's
// addresses and return at once; VerifyBatch uses it so that nothing waits
// per domain while mail servers make the check wait (greylisting, slow
// hosts). wait blocks until out is filled; its error is CheckMailboxes'.
type AsyncMailboxChecker interface {
	MailboxChecker
	StartMailboxes(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []Code) (wait func() error, err error)
}

// VerifyBatch checks many addresses: the offline stages per address, then
// one DNS lookup and one SMTP batch per domain. DomainWorkers bounds the
// domains being looked up at once; the SMTP stage holds none of them while
// it waits (with an AsyncMailboxChecker), so every domain's mailbox checks
// overlap. results[i] is for addrs[i].
func (e *Engine) VerifyBatch(ctx context.Context, addrs []string, results []Result, o Options) error {
	if len(results) < len(addrs) {
		return errors.New("verify: results shorter than addrs")
	}
	// open is the addresses past the offline stages, not likely typos:
	// the history's to answer and to keep. It is only built (sized once)
	// when there is a history to ask or tell.
	var open []int
	if e.keepsHistory(o) {
		open = make([]int, 0, len(addrs))
	}
	for i, a := range addrs {
		results[i] = e.offline(a)
		if open != nil && !final(results[i].Code) && !results[i].typo {
			open = append(open, i)
		}
	}
	open = e.fromHistory(ctx, open, results, o)
	byDomain := map[string][]int{}
	for i := range addrs {
		// Past the offline stages and not answered by the history.
		if r := &results[i]; !final(r.Code) && !r.FromHistory {
			byDomain[r.Domain] = append(byDomain[r.Domain], i)
		}
	}
	workers := e.DomainWorkers
	if workers <= 0 {
		workers = 32
	}
	todo := make(chan string)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		waits []func()
	)
	for range min(workers, len(byDomain)) {
		wg.Go(func() {
			for domain := range todo {
				if w := e.verifyDomain(ctx, domain, byDomain[domain], results, o); w != nil {
					mu.Lock()
					waits = append(waits, w)
					mu.Unlock()
				}
			}
		})
	}
feed:
	for domain := range byDomain {
		select {
		case todo <- domain:
		case <-ctx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	for _, w := range waits {
		w()
	}
	e.record(ctx, open, results, o)
	for i := range addrs {
		finish(&results[i])
	}
	return ctx.Err()
}

// finish keeps the rule that a result with corrections is invalid.
func finish(r *Result) {
	if len(r.Corrections) > 0 && r.Status != StatusInvalid {
		r.SetCode(CodeDomainNotAccepted)
	}
}

// verifyDomain runs the DNS stage for one domain's addresses and starts the
// SMTP stage. It returns a function that waits for the SMTP verdicts and
// applies them, or nil when there is nothing to wait for.
func (e *Engine) verifyDomain(ctx context.Context, domain string, idx []int, results []Result, o Options) func() {
	first := &results[idx[0]]
	mx, ok := e.domain(ctx, first)
	for _, i := range idx[1:] {
		if results[i].Code == CodeValidSyntax {
			results[i].SetCode(first.Code)
		}
	}
	if !ok || !o.SMTP || e.SMTP == nil {
		return nil
	}
	boxes := make([]string, len(idx))
	codes := make([]Code, len(idx))
	deferred := make([]bool, len(idx))
	for j, i := range idx {
		boxes[j] = mailbox(results[i])
		codes[j] = CodeValidDomain
	}
	apply := func(err error) {
		if err != nil && ctx.Err() != nil {
			for _, i := range idx {
				results[i].SetCode(CodeTimeout)
			}
			return
		}
		for j, i := range idx {
			e.applySMTP(&results[i], codes[j], deferred[j])
		}
	}
	var (
		wait func() error
		err  error
	)
	switch c := e.SMTP.(type) {
	case DeferralReporter:
		wait, err = c.StartMailboxVerdicts(ctx, domain, mx, boxes, codes, deferred)
	case AsyncMailboxChecker:
		var w func() error
		w, err = c.StartMailboxes(ctx, domain, mx, boxes, codes)
		wait = func() error { err := w(); unknownDeferrals(codes, deferred); return err }
	default:
		apply(e.checkMailboxes(ctx, domain, mx, boxes, codes, deferred))
		return nil
	}
	if err != nil {
		apply(err)
		return nil
	}
	return func() { apply(wait()) }
}

// offline runs the stages that need no network: syntax, corrections and
// lists.
func (e *Engine) offline(address string) Result {
	r := CheckSyntax(address)
	if r.Code == CodeInvalidTLD && e.ExtraTLDs[r.Domain[strings.LastIndexByte(r.Domain, '.')+1:]] {
		r.SetCode(CodeValidSyntax)
	}
	if e.Typos != nil {
		if s := e.Typos.Suggest(TrimPadding(address)); len(s) > 0 {
			r.Corrections = s
			if r.Code == CodeValidSyntax {
				// A likely typo of a well-known provider: still look the
				// domain up, but the verdict stays invalid.
				r.typo = true
			}
		}
	}
	if r.Code != CodeValidSyntax {
		return r
	}
	if e.Lists != nil {
		c := e.Lists().Classify(r.Local, r.Domain)
		r.DomainType = c.DomainType
		r.RoleAccount = c.Role
		switch {
		case c.Suppressed:
			r.SetCode(CodeSuppressed)
		case c.SpamTrap:
			r.SetCode(CodeSpamTrap)
		case c.DomainType == emaillists.DomainDisposable:
			r.SetCode(CodeSpamTrap)
		case c.Dangerous:
			r.SetCode(CodeUsernameNotAccepted)
		}
	}
	if r.Code == CodeValidSyntax && e.DNS == nil && r.typo {
		r.SetCode(CodeDomainNotAccepted)
	}
	return r
}

// domain runs the DNS stage. It returns the mail hosts and true when the
// domain can receive mail.
func (e *Engine) domain(ctx context.Context, r *Result) ([]mxdns.MXHost, bool) {
	if e.DNS == nil {
		return nil, false
	}
	res, err := e.DNS.Lookup(ctx, r.Domain)
	if err != nil {
		if ctx.Err() != nil {
			r.SetCode(CodeTimeout)
		} else {
			r.SetCode(CodeSystemError)
		}
		return nil, false
	}
	switch res.Status {
	case mxdns.NXDomain:
		r.SetCode(CodeDomainNotFound)
	case mxdns.NoAddress:
		r.SetCode(CodeDomainNoIP)
	case mxdns.NullMX:
		r.SetCode(CodeDomainNoMail)
	case mxdns.OK:
		if r.typo {
			// The domain exists, but it is a likely typo of a provider.
			r.SetCode(CodeDomainNotAccepted)
			return nil, false
		}
		r.SetCode(CodeValidDomain)
		return res.MX, true
	default:
		r.SetCode(CodeSystemError)
	}
	return nil, false
}

func (e *Engine) applySMTP(r *Result, c Code, deferred bool) {
	switch c {
	case CodeDeliverable, CodeCatchAll, CodeMailboxNotFound, CodeMailboxFull, CodeMailNotAccepted, CodeTimeout, CodeValidDomain:
		r.SetCode(c)
	default:
		r.SetCode(CodeValidDomain)
		deferred = true // an answer the engine does not know: not worth keeping
	}
	r.probed, r.deferred = true, deferred
}

// mailbox is the address the SMTP stage asks for: local part and the ASCII
// domain.
func mailbox(r Result) string { return r.Local + "@" + r.Domain }

// final reports codes after which no network stage runs.
func final(c Code) bool { return c != CodeValidSyntax }
