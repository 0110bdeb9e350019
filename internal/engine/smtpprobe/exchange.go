package smtpprobe

import (
	"errors"
	"fmt"
)

// exchange sends one window of items on s and hands every reply to its
// item's job. It returns false when the session must end (broken, the
// server asked to close, slow down or reached its per-session limit, or
// refused our sender).
func (p *Prober) exchange(q *hostQ, s *session, items []*item) bool {
	items = p.claimProbes(p.dropUnsendable(s, items))
	if len(items) == 0 {
		return true
	}
	p.mu.Lock()
	txCap := p.txPlanLocked(q, s, len(items))
	p.mu.Unlock()
	segs, rest := s.plan(items, txCap)
	if len(rest) > 0 {
		p.requeue(rest, false, nil)
	}
	if len(segs) == 0 {
		return false
	}
	var sent []*item
	for _, sg := range segs {
		sent = append(sent, sg.items...)
	}
	for _, it := range sent {
		if it.idx < 0 {
			p.st.caProbes.Add(1)
		}
	}
	s.budget = latestDeadline(sent)
	// The window's first RCPTs, unless it opens a transaction, go to the
	// open one, whose MAIL was accepted.
	txOK := s.inTx
	carried := s.txRejects
	rejected := s.rejects
	cmds := s.commands(segs)
	n, err := s.send(cmds)

	p.mu.Lock()
	defer p.mu.Unlock()
	rtt := s.rtt
	if s.slowZone {
		rtt = s.helloRTT // its round trips hold the error sleeps we chose, not the host's pace
	}
	q.estimate = max(q.estimate, 2*(s.setup+rtt))
	q.round = rtt
	q.nRcpts += len(sent)
	q.nRejected += s.rejects - rejected
	q.last = p.clk.Now()
	if s.marked.IsZero() {
		s.marked = s.t0
	}
	q.busy += q.last.Sub(s.marked)
	s.marked = q.last
	w := windowReplies{p: p, q: q, s: s, txOK: txOK}
	keep := w.read(cmds, n)
	keep = !p.noteRepliesLocked(q, s, cmds[:n]) && keep
	unanswered := rcptItems(cmds[n:])
	switch {
	case w.hostFailed:
		p.requeueLocked(w.back, false, nil)
		return false
	case w.refusal != nil:
		p.refusedLocked(q, w.refusal, s.t0, false, append(w.back, unanswered...))
		return false
	case err != nil:
		p.requeueLocked(w.back, false, nil)
		p.lostLocked(q, s, unanswered, err, w.limited)
		return false
	}
	p.requeueLocked(append(w.back, unanswered...), false, nil)
	p.txProvenLocked(q, cmds[:n])
	if n == len(cmds) {
		p.sizeGroupLocked(q, s, cmds, carried)
	}
	p.sampleLocked(q)
	return keep && n == len(cmds) && !s.broken
}

// txProvenLocked records the most RCPTs a transaction of the window took
// (answered, and not "too many recipients"), while the host's limit per
// transaction is not known (see txPlanLocked).
func (p *Prober) txProvenLocked(q *hostQ, answered []cmd) {
	if q.hs.RcptsPerTransaction > 0 {
		return
	}
	for i := range answered {
		c := &answered[i]
		if c.kind != cmdRCPT || c.reply.code == 503 || c.reply.code == 421 {
			continue
		}
		if classifyRcpt(c.reply) == kindTooMany {
			return // the limit is learnt (or a session's): nothing past it is proven
		}
		q.txProven = max(q.txProven, c.txPos)
	}
}

// windowReplies hands a window's replies to their items, in order.
type windowReplies struct {
	p    *Prober
	q    *hostQ
	s    *session
	txOK bool // the RCPTs that follow go to an accepted transaction
	full bool // the transaction answered "too many recipients" already

	back       []*item       // items to send again (front of the queue, in order)
	refusal    *refusalError // the host asked to slow down
	limited    bool          // a per-session limit was met
	hostFailed bool          // our sender was refused: the items went on
	end        bool          // the session must end after this window
}

// read handles the replies of the first n of cmds, each as its class's
// row of ReplyTable says, and reports whether the session may go on.
func (w *windowReplies) read(cmds []cmd, n int) bool {
	for i := range cmds[:n] {
		c := &cmds[i]
		cl := commandClass(c.kind, c.reply)
		switch c.kind {
		case cmdRSET:
			w.txOK = false
		case cmdMAIL:
			w.full, w.txOK = false, cl == ReplyOK
		}
		if c.kind == cmdRCPT && cl != ReplyClosing && cl != ReplyTooManyErrors {
			if !w.txOK {
				w.back = append(w.back, c.it) // 503 after a refused MAIL: not asked
				continue
			}
			w.rcptReply(c, cl)
			continue
		}
		if !w.sessionReply(c, cl, cmds[i:n], cmds[i:]) {
			return false
		}
	}
	return !w.end && w.refusal == nil
}

// sessionReply acts on a reply to MAIL or RSET, or a 421 to any command,
// of class cl (answered: the window's answered commands from it on; rest:
// all of them) and reports whether the window's replies are read on.
func (w *windowReplies) sessionReply(c *cmd, cl ReplyClass, answered, rest []cmd) bool {
	switch cl.Rule().Next {
	case NextGoOn:
		return true
	case NextSlowDown:
		// A 421 closes the session; a 4xx to MAIL (Postfix's
		// smtpd_client_message_rate_limit, a server short of
		// resources...) or RSET asks us to slow down.
		if w.refusal == nil {
			w.refusal = &refusalError{tg: w.s.tg, reply: c.reply}
		}
		if cl == ReplyDeferred && c.kind == cmdMAIL {
			return true // its RCPTs got 503: they go back as not asked
		}
		w.end = w.end || cl == ReplyClosing
	case NextNewSession:
		if cl == ReplyTooManyErrors {
			// Postfix's "421 4.7.0 <host> Error: too many errors"
			// (smtpd_hard_error_limit, met on a server whose greeting
			// hides its name) teaches a rejection budget short of it.
			w.p.learnLocked(w.q, HostState{RejectsPerSession: max(1, w.s.rejects-2), HardErrors: w.s.rejects - 1}) // (the 421 counted as one)
			if !w.limited {
				w.p.st.limits.Add(1)
			}
		} else {
			// Exim drops a session that sent too many non-mail
			// commands ("554 Too many nonmail commands").
			w.p.learnLocked(w.q, HostState{NonmailPerSession: max(1, c.txPos-1)})
		}
		w.limited, w.end = true, true
	case NextOtherHost:
		// Our sender is refused here: no verdict from this host.
		w.p.hostFailedLocked(w.q, rcptItems(rest), &hostError{tg: w.s.tg, reply: c.reply})
		w.hostFailed = true
		return false
	}
	w.back = append(w.back, rcptItems(answered)...)
	return false
}

// rcptReply handles an RCPT reply of class cl in an accepted transaction.
func (w *windowReplies) rcptReply(c *cmd, cl ReplyClass) {
	p, q, s, it, r := w.p, w.q, w.s, c.it, c.reply
	if cl.Rule().Next == NextTransaction {
		w.tooMany(c)
		return
	}
	s.answered++
	if c.txPos == 1 {
		s.probeTx = false // a new transaction took an RCPT: the limit is per transaction
	}
	if it.done {
		return
	}
	s.verdicts++
	q.refusals = 0
	p.verdictLocked(q, it, r, cl)
}

// tooMany handles "452 too many recipients": the host's limit per
// transaction when earlier RCPTs of the transaction were taken, its limit
// per session when this was the first RCPT of a later transaction. The
// address is not to blame: it goes to the next transaction or session.
func (w *windowReplies) tooMany(c *cmd) {
	p, q, s, it := w.p, w.q, w.s, c.it
	full := w.full
	w.full = true
	switch {
	case full:
		// The rest of a transaction that met a limit: nothing new.
		w.back = append(w.back, it)
	case c.txPos > 1:
		p.learnLocked(q, HostState{RcptsPerTransaction: c.txPos - 1})
		if s.answered == c.txPos-1 {
			// The session's first transaction: the next one tells a
			// limit per transaction from one per session.
			s.probeTx = true
		}
		w.back = append(w.back, it)
	case s.answered > 0:
		p.learnLocked(q, HostState{RcptsPerSession: s.answered})
		w.back = append(w.back, it)
		if !w.limited {
			p.st.limits.Add(1)
		}
		w.limited, w.end = true, true
	default:
		// Refused at the first RCPT of a session: once more, then give up.
		w.end = true
		if it.drops++; it.drops >= 2 {
			it.job.finalLocked(it, Result{Outcome: Unconfirmed, Reply: c.reply.last, Host: it.tg.host})
			return
		}
		w.back = append(w.back, it)
	}
}

// rcptItems returns the items of the RCPT commands among cmds.
func rcptItems(cmds []cmd) []*item {
	var out []*item
	for i := range cmds {
		if cmds[i].kind == cmdRCPT {
			out = append(out, cmds[i].it)
		}
	}
	return out
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

// verdictLocked handles an RCPT reply of class cl (other than 421 and
// "too many recipients") in an accepted transaction, as its row of
// ReplyTable says.
func (p *Prober) verdictLocked(q *hostQ, it *item, rc reply, cl ReplyClass) {
	j := it.job
	rule := cl.Rule()
	switch {
	case rule.Next == NextRetryLater:
		q.nDeferred++
		j.temporaryLocked(it, rc, q.estimate)
		if it.heapIx >= 0 && it.greyQ == nil { // deferred: waits out the host's greylisting
			if q.greyWaiting == 0 || it.due.After(q.greyDue) {
				q.greyDue = it.due
			}
			it.greyQ = q
			q.greyWaiting++
			p.noteGreyLocked(it)
		}
	case cl == ReplyAccepted:
		j.acceptLocked(it, rc)
	case it.idx < 0: // the catch-all probe: refused, or no verdict
		if rule.Outcome == Unconfirmed {
			j.caVerdictLocked(caInconclusive)
		} else {
			j.caVerdictLocked(caNo)
			j.finalLocked(it, Result{})
			break
		}
		j.finalLocked(it, Result{Outcome: Unconfirmed, Reply: rc.last, Host: it.tg.host})
	default:
		if cl == ReplyMissing && provesNoCatchAll(rc) {
			j.noCatchAllLocked()
		}
		j.finalLocked(it, Result{Outcome: rule.Outcome, Reply: rc.last, Host: it.tg.host})
	}
}

// lostLocked handles items that got no reply because the session failed:
// the host failed (no verdict yet in this session), the deadline ran out,
// or the connection was lost mid-session.
func (p *Prober) lostLocked(q *hostQ, s *session, lost []*item, err error, limited bool) {
	var slow *slowedError
	cl := lostClass(err)
	switch {
	case errors.As(err, &slow):
		// The host holds replies back after this many errors a session:
		// later sessions stop short of it; nothing here is the address's.
		p.learnLocked(q, HostState{RejectsPerSession: max(1, slow.rejects-1), ErrorSleep: slow.gap})
		p.requeueLocked(lost, false, err)
	case len(lost) == 0:
	case isBudget(err), cl.Rule().Next == NextOtherEgress:
		// The caller's deadline, or a proxy lost: not the host's doing.
		p.requeueLocked(lost, false, err)
	case s.verdicts == 0:
		p.hostFailedLocked(q, lost, err)
	default:
		// Lost mid-session. Only the first item was surely being handled:
		// it counts a drop; the others go back as they were. A server that
		// drops after some RCPTs has shown its limit.
		if !limited {
			p.st.limits.Add(1)
			p.learnLocked(q, HostState{RcptsPerSession: s.answered})
		}
		for i := len(lost) - 1; i >= 0; i-- {
			lost[i].job.requeueLocked(lost[i], i == 0 && !limited, err)
		}
	}
}
