package smtpprobe

import (
	"errors"
	"fmt"
	"time"
)

// exchange sends one window of items on s and hands every reply to its
// item's job. It returns false when the session must end (broken, the
// server asked to close or reached its per-session limit, or refused our
// sender).
func (p *Prober) exchange(q *hostQ, s *session, items []*item) bool {
	items = p.dropUnsendable(s, items)
	if len(items) == 0 {
		return true
	}
	s.budget = latestDeadline(items)
	rcpts := make([]string, len(items))
	for i, it := range items {
		rcpts[i] = it.addr
		if it.idx < 0 {
			p.st.caProbes.Add(1)
		}
	}
	replies := make([]txReply, len(items))
	n, err := s.transactions(rcpts, replies)

	p.mu.Lock()
	defer p.mu.Unlock()
	q.estimate = max(q.estimate, 2*(s.setup+s.rtt))
	q.nRcpts += len(items)
	q.last = time.Now()
	keep, limited := err == nil, false
	for i := 0; i < n; i++ {
		it, r := items[i], replies[i]
		if it.done {
			continue
		}
		switch mail := r.mail; mail.class() {
		case 2:
		case 4:
			it.job.temporaryLocked(it, mail, q.estimate)
			keep = false
			continue
		default:
			// Our sender is refused here (5xx): no verdict from this host.
			p.hostFailedLocked(q, items[i:], &hostError{tg: it.tg, reply: mail})
			return false
		}
		s.verdicts++
		switch p.verdictLocked(q, it, r) {
		case endSession:
			keep = false
		case sessionLimit:
			if !limited {
				p.st.limits.Add(1)
			}
			keep, limited = false, true
		}
	}
	if err != nil {
		answered := s.rcpts // RCPTs answered before the first lost item
		if n < len(replies) && replies[n].pos > 0 {
			answered = replies[n].pos - 1
		}
		if !limited && s.verdicts > 0 && !isBudget(err) && !isProxyLost(err) {
			p.st.limits.Add(1)
		}
		p.lostLocked(q, s, items[n:], err, limited, answered)
	}
	return keep
}

// dropUnsendable settles items the server cannot take (a non-ASCII address
// without SMTPUTF8) and returns the rest.
func (p *Prober) dropUnsendable(s *session, items []*item) []*item {
	if s.smtputf8 {
		return items
	}
	keep := items[:0]
	for _, it := range items {
		if isASCII(it.addr) {
			keep = append(keep, it)
			continue
		}
		p.mu.Lock()
		it.job.finalLocked(it, Result{Outcome: Unconfirmed, Host: it.tg.host,
			Err: fmt.Errorf("%w: non-ASCII address and %s lacks SMTPUTF8", ErrBadAddress, it.tg.host)})
		p.mu.Unlock()
	}
	return keep
}

type next int

const (
	goOn         next = iota
	endSession        // the server asked to close
	sessionLimit      // the server's limit per session: reconnect at once
)

// verdictLocked handles an RCPT reply after an accepted MAIL.
func (p *Prober) verdictLocked(q *hostQ, it *item, r txReply) next {
	j, rc := it.job, r.rcpt
	switch k := classifyRcpt(rc); k {
	case kindAccepted:
		j.acceptLocked(it, rc)
	case kindMissing, kindFull, kindPolicy:
		if it.idx < 0 {
			j.caVerdictLocked(caNo)
			j.finalLocked(it, Result{})
			break
		}
		out := Missing
		switch k {
		case kindFull:
			out = Full
		case kindPolicy:
			out = Policy
		}
		j.finalLocked(it, Result{Outcome: out, Reply: rc.last, Host: it.tg.host})
	case kindTemporary, kindRetryNow:
		if (k == kindRetryNow || rc.code == 421) && r.pos > 1 {
			// 452 4.5.3, or 421, after some RCPTs: the server's limit per
			// session, not the address's: remember it and reconnect.
			p.learnLimitLocked(q, r.pos-1)
			j.requeueLocked(it, false, nil)
			return sessionLimit
		}
		if k == kindRetryNow {
			// Refused at the first RCPT of a session: once more, then give up.
			if it.drops++; it.drops >= 2 {
				j.finalLocked(it, Result{Outcome: Unconfirmed, Reply: rc.last, Host: it.tg.host})
			} else {
				j.requeueLocked(it, false, nil)
			}
			return endSession
		}
		j.temporaryLocked(it, rc, q.estimate)
		if rc.code == 421 {
			return endSession
		}
	default:
		if it.idx < 0 {
			j.caVerdictLocked(caInconclusive)
		}
		j.finalLocked(it, Result{Outcome: Unconfirmed, Reply: rc.last, Host: it.tg.host})
	}
	return goOn
}

func (p *Prober) learnLimitLocked(q *hostQ, n int) { lowerCap(&q.rcptCap, n) }

// lowerCap sets a learnt per-session limit (0: none yet) to n when n is
// positive and lower.
func lowerCap(limit *int, n int) {
	if n >= 1 && (*limit == 0 || n < *limit) {
		*limit = n
	}
}

// lostLocked handles items that got no complete reply because the session
// failed: the host failed (no verdict yet in this session), the deadline
// ran out, or the connection was lost mid-session.
func (p *Prober) lostLocked(q *hostQ, s *session, lost []*item, err error, limited bool, answered int) {
	var slow *slowedError
	switch {
	case errors.As(err, &slow):
		// The host holds replies back after this many errors a session:
		// later sessions stop short of it; nothing here is the address's.
		lowerCap(&q.rejectCap, max(1, slow.rejects-1))
		for i := len(lost) - 1; i >= 0; i-- {
			lost[i].job.requeueLocked(lost[i], false, err)
		}
	case len(lost) == 0:
	case isBudget(err), isProxyLost(err):
		for i := len(lost) - 1; i >= 0; i-- {
			lost[i].job.requeueLocked(lost[i], false, err)
		}
	case s.verdicts == 0:
		p.hostFailedLocked(q, lost, err)
	default:
		// Lost mid-session. Only the first item was surely being handled:
		// it counts a drop; the others go back as they were. A server that
		// drops after some RCPTs has shown its limit.
		if !limited {
			p.learnLimitLocked(q, answered)
		}
		for i := len(lost) - 1; i >= 0; i-- {
			lost[i].job.requeueLocked(lost[i], i == 0 && !limited, err)
		}
	}
}
