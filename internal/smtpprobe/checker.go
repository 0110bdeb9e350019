package smtpprobe

import (
	"context"

	"github.com/emaildata/emaildata/internal/mxdns"
	"github.com/emaildata/emaildata/internal/verify"
)

var _ verify.MailboxChecker = (*Prober)(nil)

// CheckMailboxes implements verify.MailboxChecker with ProbeBatch.
func (p *Prober) CheckMailboxes(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, out []verify.Code) error {
	res := make([]Result, len(addrs))
	err := p.ProbeBatch(ctx, domain, mx, addrs, res)
	for i := range addrs {
		out[i] = res[i].Outcome.Code()
	}
	return err
}
