package verify

import (
	"context"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
)

// History keeps mailbox verdicts between runs (internal/engine/evhistory
// implements it). The engine asks it before the DNS stage and tells it
// the SMTP stage's verdicts, each time for the call's tenant
// (Options.Tenant): the history decides what another tenant's checks may
// answer (evhistory.Scope).
type History interface {
	// Lookup returns, for each mailbox (local@ascii-domain), the verdict
	// recorded at most maxAge ago (nil: any still kept) that tenant may
	// see, or a zero PastVerdict. An error means nothing could be read:
	// the engine probes every address, it never trusts what it could not
	// read.
	Lookup(ctx context.Context, tenant string, mailboxes []string, maxAge *time.Duration) ([]PastVerdict, error)
	// Record keeps tenant's new verdicts, as long as their outcomes' TTLs
	// say. Failures are the history's to count; the verdicts stand.
	Record(ctx context.Context, tenant string, verdicts []NewVerdict) error
}

// PastVerdict is a verdict from the history; a zero Code means none.
// CheckedAt is when the history dates it (to the hour for another
// tenant's check in a shared history).
type PastVerdict struct {
	Code      Code
	CheckedAt time.Time
}

// NewVerdict is a verdict of the SMTP stage.
type NewVerdict struct {
	Mailbox   string
	Code      Code
	CheckedAt time.Time
	// Temporary: the verdict only says "not now" (a deferral that
	// outlasted the retries); the history does not keep it.
	Temporary bool
}

// DeferralReporter is an AsyncMailboxChecker that also says, per address,
// whether an unconfirmed verdict (CodeValidDomain) was a deferral
// (greylisting or another 4xx that outlasted the retries). With a checker
// that does not implement it, the engine treats every unconfirmed verdict
// as a deferral and the history never keeps one.
type DeferralReporter interface {
	StartMailboxVerdicts(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []Code, deferred []bool) (wait func() error, err error)
}

// useHistory reports whether the call may answer from the history.
func (e *Engine) useHistory(o Options) bool {
	return e.keepsHistory(o) && e.SMTP != nil && e.DNS != nil && (o.MaxAge == nil || *o.MaxAge > 0)
}

// keepsHistory reports whether a call's SMTP verdicts go to the history
// (with a maximum age of 0 too: that asks for fresh verdicts, not none kept).
func (e *Engine) keepsHistory(o Options) bool { return e.History != nil && o.SMTP }

// fromHistory answers the results at idx whose mailboxes have a fresh
// enough verdict, and returns the indexes left to probe.
func (e *Engine) fromHistory(ctx context.Context, idx []int, results []Result, o Options) []int {
	if !e.useHistory(o) || len(idx) == 0 {
		return idx
	}
	boxes := make([]string, len(idx))
	for j, i := range idx {
		boxes[j] = mailbox(results[i])
	}
	past, err := e.History.Lookup(ctx, o.Tenant, boxes, o.MaxAge)
	if err != nil {
		return idx
	}
	left := idx[:0:0]
	for j, i := range idx {
		if past[j].Code == 0 {
			left = append(left, i)
			continue
		}
		results[i].SetCode(past[j].Code)
		results[i].FromHistory, results[i].CheckedAt = true, past[j].CheckedAt
	}
	return left
}

// record tells the history the SMTP verdicts of the results at idx.
func (e *Engine) record(ctx context.Context, idx []int, results []Result, o Options) {
	if !e.keepsHistory(o) || len(idx) == 0 {
		return
	}
	now := e.now()
	vs := make([]NewVerdict, 0, len(idx))
	for _, i := range idx {
		r := &results[i]
		if !r.probed || r.Code == CodeTimeout {
			continue
		}
		r.CheckedAt = now
		vs = append(vs, NewVerdict{Mailbox: mailbox(*r), Code: r.Code, CheckedAt: now, Temporary: r.deferred})
	}
	if len(vs) == 0 {
		return
	}
	// Recorded even when the caller's deadline has just passed: the
	// verdicts are good, and the next call should not pay for them again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = e.History.Record(rctx, o.Tenant, vs)
}
