package smtpprobe

import (
	"context"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/verify"
)

var _ verify.AsyncMailboxChecker = (*Prober)(nil)

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
	res := make([]Result, len(addrs))
	pd, err := p.Start(ctx, domain, mx, addrs, res)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := pd.Wait()
		for i := range addrs {
			out[i] = res[i].Outcome.Code()
		}
		return err
	}, nil
}
