package smtpprobe

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
)

// Catch-all claims (issue 22). Processes sharing Config.Learnt that reach
// a domain's catch-all probe at the same moment would each send one (the
// shared verdict only exists once found). So a probe is claimed
// fleet-wide just before it is sent; a process that loses the claim keeps
// the probe item (and so its job's accepted addresses) pending and takes
// the holder's verdict once it is shared, or claims and probes itself when
// the claim ends without one (the holder died or got no answer).

// A probe waiting for another process's claim is woken by the holder's
// verdict or its giving up (fleet.Learnt.Watch), and polls only as a
// safety net: for a holder killed (its claim expires without a word) and
// a wake-up lost while the backend reconnected. Every claimPollList for a
// list's probe (its rows have time, and a list can have a thousand probes
// waiting at once, two round trips a poll each), claimPollCall for a call
// with a deadline (an API call waits for it). Polling was all there was
// before: backoff from 20 ms to 2 s cost 1.6x the workers' CPU
// (docs/benchmarks.md, claims).
const (
	claimPollList = 5 * time.Second
	claimPollCall = 500 * time.Millisecond
	claimTTLMin   = 20 * time.Millisecond
)

func claimPollFor(j *job) time.Duration {
	if j.deadline.IsZero() {
		return claimPollList
	}
	return claimPollCall
}

func claimName(domain string) string { return fleet.CatchAllClaim(domain) }

// claimTTL is how long a probe's claim lasts: the wait for its reply in
// an open session, and no longer than its call may take.
func (p *Prober) claimTTL(j *job) time.Duration {
	ttl := p.cfg.CommandTimeout
	if !j.deadline.IsZero() {
		ttl = min(ttl, p.clk.Until(j.deadline))
	}
	return max(ttl, claimTTLMin)
}

// claim takes the fleet-wide claim on it (a job's own catch-all probe)
// for ttl. A backend that does not answer claims nothing: the probe is
// sent, as without a fleet.
func (p *Prober) claim(it *item, ttl time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	ok, err := p.cfg.Learnt.Claim(ctx, claimName(it.job.domain), p.holder, ttl)
	return ok || err != nil
}

// claimProbes claims the catch-all probes among items about to be sent
// and returns the items to send: a probe whose claim another process
// holds waits for that one's verdict (awaitClaimed) instead.
func (p *Prober) claimProbes(items []*item) []*item {
	if p.cfg.Learnt == nil {
		return items
	}
	out := items[:0]
	for _, it := range items {
		// idx, sub and job never change: no lock needed to read them.
		if it.idx >= 0 || it.sub {
			out = append(out, it)
			continue
		}
		if p.claim(it, p.claimTTL(it.job)) {
			p.mu.Lock()
			it.job.claimed = true
			p.mu.Unlock()
			out = append(out, it)
			continue
		}
		p.st.caClaimsLost.Add(1)
		go p.awaitClaimed(it)
	}
	return out
}

// awaitClaimed waits for the shared verdict of a probe whose claim
// another process holds, until the verdict comes, the item ends otherwise
// (a "user unknown" here, the call's end), or the claim is free again:
// then it is this process's, and the probe goes back to its host. It
// watches the claim before its first read, so a verdict shared after that
// read wakes it; the claim's TTL and lost wake-ups are the poll's.
func (p *Prober) awaitClaimed(it *item) {
	woken, stop := p.cfg.Learnt.Watch(claimName(it.job.domain))
	defer stop()
	poll := p.claimPoll(it.job)
	for {
		if p.itemDone(it) {
			return
		}
		if v, ok := p.sharedCatchAll(context.Background(), it.job.domain); ok {
			p.mu.Lock()
			p.takeSharedVerdictLocked(it, v)
			p.mu.Unlock()
			return
		}
		// Tried again at once too: the holder may have given it up between
		// this process's first try and Watch, a wake-up this one missed.
		if p.claim(it, p.claimTTL(it.job)) {
			p.mu.Lock()
			it.job.requeueLocked(it, false, nil)
			p.mu.Unlock()
			return
		}
		t := p.clk.NewTimer(poll/2 + rand.N(poll))
		select {
		case <-woken:
		case <-t.C():
		case <-it.job.done:
			t.Stop()
			return
		}
		t.Stop()
	}
}

func (p *Prober) itemDone(it *item) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return it.done
}

// holdClaimLocked keeps the claim of a probe deferred for a 4xx until
// after its retry: the others would be deferred alike, and a probe of
// their own would only start its greylisting window later.
func (p *Prober) holdClaimLocked(it *item, delay time.Duration) {
	if p.cfg.Learnt == nil || it.idx >= 0 || it.sub {
		return
	}
	ttl := delay + p.claimTTL(it.job)
	go p.claim(it, ttl)
}

// releaseClaimLocked gives up the claim of a probe that ended without a
// verdict, so that the processes waiting for it probe at once rather than
// after its TTL. A verdict keeps the claim until it expires: the waiters
// read the verdict first, even when sharing it is slow.
func (p *Prober) releaseClaimLocked(j *job) {
	if p.cfg.Learnt == nil || j.ca == caYes || j.ca == caNo || !j.claimed {
		return
	}
	j.claimed = false
	l, name, holder := p.cfg.Learnt, claimName(j.domain), p.holder
	background(func(ctx context.Context) error { return l.Unclaim(ctx, name, holder) })
}
