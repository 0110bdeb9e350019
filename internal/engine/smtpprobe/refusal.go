package smtpprobe

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// A host asks to slow down with a 421 or other 4xx greeting (Postfix's
// anvil: "421 4.7.0 <host> Error: too many connections from <ip>" once a
// client exceeds smtpd_client_connection_count_limit or
// smtpd_client_connection_rate_limit; Exim's smtp_accept_max_per_host), a
// 421 or 4xx to EHLO, MAIL or RSET, or by refusing, resetting or dropping
// connections after it has answered before. RFC 5321 makes 421 transient
// (§3.8, §4.2.5): the client is to try again later. So the host's queue is
// kept and waits out a backoff, and the host gets fewer sessions and new
// connections from then on.

// Postfix's anvil counts a client's connections in fixed windows of
// anvil_rate_time_unit (default 60s: Config.RefusalWindow), starting again
// at the first connection after a window ends (anvil.c; its clock counts
// whole seconds). A host that accepted n connections in the last window,
// then refused one, takes n a window; the window that refused began at or
// before the first of them, so it has ended windowMargin after that one's
// window.
const (
	windowMargin = 2 * time.Second
	// maxDials bounds the connection times a host keeps for that count.
	maxDials = 256
	// minConnRate is the lowest rate a host is lowered to: one new
	// connection a minute.
	minConnRate = 1.0 / 60
	// maxBackoffSteps: the backoff doubles at most this many times.
	maxBackoffSteps = 5
)

// refusedLocked handles a refusal at q: the host's limits are lowered
// (once a refusal episode: sessions dialled before the last lowering were
// refused for the same reason), no session starts before a backoff, and
// items go back to the host's queue, where those whose deadline leaves no
// room for the wait are settled Unconfirmed at once. After MaxRefusals in a
// row the host counts as failed: its items move on to their next MX host.
func (p *Prober) refusedLocked(q *hostQ, rf *refusalError, dialled time.Time, atConnect bool, items []*item) {
	now := p.clk.Now()
	p.st.refusals.Add(1)
	q.refusals++
	q.lastRefusal = rf
	if atConnect {
		q.estimate = max(q.estimate, 2*now.Sub(dialled)) // the next try takes about as long
	}
	if rf.reply.code != 0 {
		p.learnLocked(q, HostState{Answered: true})
	}
	if q.refusals >= p.cfg.MaxRefusals {
		err := &hostError{tg: rf.tg, reply: rf.reply, err: fmt.Errorf("%w: %d times in a row, last: %w", ErrHostRefusing, q.refusals, rf)}
		q.refusals = 0
		p.penalties.mark(q.key, err)
		p.hostFailedLocked(q, items, err)
		return
	}
	if until := now.Add(p.backoff(q.refusals)); until.After(q.backoffUntil) {
		q.backoffUntil = until
	}
	if atConnect {
		q.refusedAt = p.noteDialLocked(q.refusedAt, dialled)
	}
	switch {
	case atConnect && q.hs.ConnsPerWindow > 0 && !q.windowEnd.IsZero() && !dialled.Before(q.windowEnd):
		// Refused again at a host that counts connections in windows,
		// by a connection made after waiting for the end of the window
		// its accepted connections began (hostQ.windowEnd):
		// it counts every attempt, refused ones too, over a sliding
		// window (sendmail's ratecontrol, Haraka's limit plugin), so a
		// retry within the window keeps it full. Its limit stays (the
		// refused attempts made this count, not fewer slots), and from
		// now on attempts are counted as it counts them, over the last
		// window, refused ones too: the next comes once enough of them
		// have left the window (slidingSlotLocked).
		//
		// Refused beside sessions of ours, at a host that never took
		// more at once: that may as well be a limit of sessions at once
		// (anvil says the same words for both; the window may have been
		// learnt from a refusal that anvil, lagging behind a closed
		// connection, made with none of ours open). It gets no more at
		// once from now on.
		if rf.beside > 0 && q.peakOpen <= rf.beside {
			p.learnLocked(q, HostState{Conns: rf.beside})
		}
		if !q.sliding {
			q.sliding = true
			q.slideSlots = append(append([]time.Time(nil), q.accepted...), q.refusedAt...)
		}
	case !dialled.Before(q.loweredAt):
		p.lowerLocked(q, now, atConnect, rf.beside)
	}
	p.settleUnfitLocked(q)
	p.requeueLocked(items, false, nil)
	p.armBackoffLocked(q)
}

// lowerLocked lowers q's limits. A host that refused a connection while
// none of our other connections to it was open, after accepting n (at
// least two) in the last RefusalWindow, counts connections in windows: it
// gets n a window, and nothing before the current one ends. So does one
// that took more at once before than were open beside the refused one.
// Otherwise (Postfix's anvil says the same "too many connections" for its
// concurrency limit) its concurrent sessions go down to those open beside
// the refused one (at least one), and its rate is halved; should it refuse
// again with none open, or fewer than it took at once before, that is a
// window.
//
// "Open beside" counts our connections over the refused one's life: those
// open when it was dialled (beside) and those open when its refusal is
// read (q.conns, dialled after it too: the host may have accepted them
// first). On a busy machine the refusal may be read after the connection
// beside it closed; counting only then, a limit of one session at once
// would be taken for a window, and sessions would go on being opened two
// at a time. Sessions waiting for their lease or rate are not counted: the
// host has not seen them.
func (p *Prober) lowerLocked(q *hostQ, now time.Time, atConnect bool, beside int) {
	q.loweredAt = now
	others := max(q.conns, beside)
	// (Up to the most we open at once: sessions sleeping through the
	// host's errors may be more than MaxConnsPerHost, and the host took
	// them; the learnt limit is the host's, our own caps apply beside it.)
	conns := max(1, min(p.sleepingConns(q), others))
	win := p.cfg.RefusalWindow
	var in []time.Time // accepted within the window, oldest first
	for _, t := range q.accepted {
		if now.Sub(t) < win {
			in = append(in, t)
		}
	}
	slices.SortFunc(in, time.Time.Compare)
	n := len(in)
	if atConnect && (others == 0 || q.peakOpen > others) && n >= 2 {
		p.learnLocked(q, HostState{ConnsPerWindow: n})
		// The retry comes when the second of them has left the window,
		// not the first: at a host that counts over a sliding window,
		// refused attempts too (sendmail's ratecontrol, Haraka's limit),
		// the refused one holds the first one's place. Anvil's fixed
		// window has ended by then too.
		if end := in[1].Add(win + windowMargin); end.After(q.backoffUntil) {
			q.backoffUntil = end
		}
		q.windowEnd = q.backoffUntil // a refusal of a connection from then on: see refusedLocked
		return
	}
	p.learnLocked(q, HostState{Conns: conns, ConnRate: max(p.connRate(q)/2, minConnRate)})
}

// windowSlotLocked takes a connection slot in q's window when the host
// counts connections in windows (HostState.ConnsPerWindow), and reports
// whether there was one. Our window starts with our first connection after
// the last ended (and so does the host's); without a slot, q waits for the
// next window.
func (p *Prober) windowSlotLocked(q *hostQ, now time.Time) bool {
	limit := q.hs.ConnsPerWindow
	if limit <= 0 {
		return true
	}
	if q.sliding {
		return p.slidingSlotLocked(q, now, limit)
	}
	if q.winStart.IsZero() {
		// The limit was learnt after connections of ours in the host's
		// current window (from the fleet, while this process's first
		// sessions ran): they count in it. (Not those before a refusal
		// taught it: the backoff waited that window out.)
		for _, t := range q.accepted {
			if now.Sub(t) < p.cfg.RefusalWindow && t.After(q.loweredAt) {
				if q.winCount == 0 || t.Before(q.winStart) {
					q.winStart = t
				}
				q.winCount++
			}
		}
	}
	if q.winStart.IsZero() || !now.Before(q.winStart.Add(p.cfg.RefusalWindow+windowMargin)) {
		q.winStart, q.winCount = now, 0
	}
	if q.winCount < limit {
		q.winCount++
		return true
	}
	q.backoffUntil = q.winStart.Add(p.cfg.RefusalWindow + windowMargin)
	if q.lastRefusal != nil {
		p.settleUnfitLocked(q)
	}
	p.armBackoffLocked(q)
	return false
}

// slidingSlotLocked is windowSlotLocked at a host that counts every
// attempt over the last window (hostQ.sliding): a connection may start
// when fewer than limit attempts, accepted or refused, were made within
// RefusalWindow (and windowMargin) before now (hostQ.slideSlots: the
// connections of the window before the host slid, then every slot
// taken); otherwise q waits until the oldest of them has left it.
func (p *Prober) slidingSlotLocked(q *hostQ, now time.Time, limit int) bool {
	span := p.cfg.RefusalWindow + windowMargin
	keep, oldest := q.slideSlots[:0], now
	for _, t := range q.slideSlots {
		if now.Sub(t) < span {
			keep = append(keep, t)
			oldest = minTime(oldest, t)
		}
	}
	q.slideSlots = keep
	if len(keep) < limit {
		q.slideSlots = append(q.slideSlots, now)
		return true
	}
	q.backoffUntil = oldest.Add(span)
	if q.lastRefusal != nil {
		p.settleUnfitLocked(q)
	}
	p.armBackoffLocked(q)
	return false
}

// backoff is the wait after the n-th refusal in a row: RefusalBackoff
// doubled n-1 times (at most maxBackoffSteps), with jitter (half to all of
// it) so that hosts refused together are not retried together.
func (p *Prober) backoff(n int) time.Duration {
	d := p.cfg.RefusalBackoff << min(max(n-1, 0), maxBackoffSteps)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// canWaitLocked reports whether it's deadline leaves room for q's backoff,
// a rate token and a session.
func (p *Prober) canWaitLocked(q *hostQ, it *item) bool {
	dl := it.job.deadline
	if dl.IsZero() {
		return true
	}
	token := time.Duration(float64(time.Second) / p.connRate(q))
	return p.clk.Until(dl) >= p.clk.Until(q.backoffUntil)+token+q.estimate
}

// settleUnfitLocked settles the items queued at q that cannot wait for its
// backoff.
func (p *Prober) settleUnfitLocked(q *hostQ) {
	check := func(it *item) {
		if it != nil && !it.done && !p.canWaitLocked(q, it) {
			it.job.refusedLocked(it, q.lastRefusal)
		}
	}
	for _, it := range q.front {
		check(it)
	}
	for _, it := range q.back[q.head:] {
		check(it)
	}
}

// armBackoffLocked kicks q when its backoff ends.
func (p *Prober) armBackoffLocked(q *hostQ) {
	if q.timer != nil {
		return
	}
	q.timer = p.clk.AfterFunc(p.clk.Until(q.backoffUntil), func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		q.timer = nil
		p.kick(q)
	})
}

// refusedLocked settles an item whose host keeps refusing past its
// deadline: the host answered, so Unconfirmed, with the refusal as reply.
func (j *job) refusedLocked(it *item, rf *refusalError) {
	it.settled = true
	r := Result{Outcome: Unconfirmed, Host: rf.tg.host, Reply: rf.reply.last, Err: rf}
	if rf.reply.code == 0 && it.tries > 0 {
		r.Reply, r.Greylisted = it.last.last, looksGreylisted(it.last)
	}
	j.finalLocked(it, r)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
