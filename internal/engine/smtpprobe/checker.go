package smtpprobe

import (
	"context"
	"errors"
	"strings"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/verify"
)

var (
	_ verify.AsyncMailboxChecker = (*Prober)(nil)
	_ verify.DeferralReporter    = (*Prober)(nil)
)

// CheckMailboxes implements verify.MailboxChecker with ProbeBatch.
func (p *Prober) CheckMailboxes(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []verify.Code) error {
	wait, err := p.StartMailboxes(ctx, domain, mx, addrs, out)
	if err != nil {
		return err
	}
	return wait()
}

// StartMailboxes implements verify.AsyncMailboxChecker with Start.
func (p *Prober) StartMailboxes(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []verify.Code) (func() error, error) {
	return p.StartMailboxVerdicts(ctx, domain, mx, addrs, out, nil)
}

// StartMailboxVerdicts implements verify.DeferralReporter: deferred[i]
// (when deferred is not nil) says whether an Unconfirmed verdict only
// means "not now" (Deferral), which the verification history does not
// keep.
func (p *Prober) StartMailboxVerdicts(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []verify.Code, deferred []bool) (func() error, error) {
	res := make([]Result, len(addrs))
	pd, err := p.Start(ctx, domain, mx, addrs, res)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := pd.Wait()
		for i := range addrs {
			out[i] = res[i].Outcome.Code()
			if deferred != nil {
				deferred[i] = Deferral(res[i])
			}
		}
		return err
	}, nil
}

// Deferral reports whether r is an Unconfirmed verdict that only says
// "not now": greylisting or another 4xx that outlasted the retries or the
// deadline, or a host that kept asking to slow down. Unconfirmed verdicts
// for other reasons (a session dropped after the greeting, a 5xx to our
// own commands) are the host's lasting answer.
func Deferral(r Result) bool {
	if r.Outcome != Unconfirmed {
		return false
	}
	return r.Greylisted || strings.HasPrefix(r.Reply, "4") || errors.Is(r.Err, ErrHostRefusing)
}
