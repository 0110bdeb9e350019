package smtpprobe

import (
	"context"
	"strconv"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
)

// Window tickets (issue 34). A host that counts connections in windows
// (HostState.ConnsPerWindow: Postfix's anvil, sendmail's ratecontrol)
// takes n a window from all the processes of a fleet together. Each
// process counts its own window (windowSlotLocked); across processes,
// every connection holds one of the host's n fleet-wide tickets (claims
// of Config.Learnt) for a window: at most n connections start within
// any window, whichever processes open them. Before tickets, a shared
// Limiter spaced such a host's connections window/n apart (a rate as
// safe as the window), so a process alone spent a whole window on n
// sessions it could have had at once: at a greylisting host, the first
// pass then ran a window long and its retries into a third window.

// ticketTTL is how long a connection holds its ticket: the host's window
// and half the margin our own window count keeps (a window of the host
// lies within any span that long that starts with its first connection).
func (p *Prober) ticketTTL() time.Duration { return p.cfg.RefusalWindow + windowMargin/2 }

// ticketPoll is the wait before trying again for a ticket that other
// processes hold (when theirs expire is not known here).
const ticketPoll = windowMargin

// ticketName names ticket i of k's window.
func ticketName(k fleet.Key, i int) string {
	return "window:" + k.Egress + "|" + k.Host + "#" + strconv.Itoa(i)
}

// windowTicket takes one of k's n tickets for a connection about to be
// made, and reports whether there was one. Without a fleet, or with a
// backend that does not answer, there is always one: this process's own
// window count holds.
func (p *Prober) windowTicket(k fleet.Key, n int) bool {
	if p.cfg.Learnt == nil || n <= 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	seq := p.tickets.Add(1)
	holder := p.holder + "#" + strconv.FormatUint(seq, 10) // one a connection: a claim taken again would be renewed
	for j := range n {
		ok, err := p.cfg.Learnt.Claim(ctx, ticketName(k, int((seq+uint64(j))%uint64(n))), holder, p.ticketTTL())
		if ok || err != nil {
			return true
		}
	}
	return false
}

// noTicketLocked puts back the items of a session that got no ticket:
// its window slot is given back, and q waits ticketPoll.
func (p *Prober) noTicketLocked(q *hostQ, items []*item) {
	switch {
	case q.sliding && len(q.slideSlots) > 0:
		q.slideSlots = q.slideSlots[:len(q.slideSlots)-1]
	case !q.sliding && q.winCount > 0:
		q.winCount--
	}
	if until := p.clk.Now().Add(ticketPoll); until.After(q.backoffUntil) {
		q.backoffUntil = until
	}
	p.armBackoffLocked(q)
	p.requeueLocked(items, false, nil)
}
