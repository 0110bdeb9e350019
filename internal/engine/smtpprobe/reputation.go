package smtpprobe

import (
	"math"
	"time"
)

// Reputation delays (issue 34, item 3). Some hosts keep a reputation per
// client address: once an address has sent a few unknown recipients,
// every reply to it waits, in every session from then on (Haraka's karma,
// reputation services). Unlike Postfix's error sleep (per session) or a
// bad-recipient throttle (per transaction), neither a new session nor a
// new transaction helps; another egress identity (a SOCKS5 proxy of
// Config.PickRoute, a client address of its own) does.
//
// Learning, from reply latencies on the injected clock: a reply that
// comes slowReplyGap later than its round trip (not a flow-control pause)
// after the identity sent unknown recipients to the host is a suspicion,
// with the identity's unknown recipients before it as the host's
// threshold. A session whose RSET (which no throttle delays) comes late
// ends at once, as does one whose host may be served through a clean
// identity. The suspicion is confirmed when a later session from that
// identity has an EHLO round trip slowReplyGap above the host's usual
// one (a new session did not help: the host's HostState then gets
// ReputationAfter and ReputationDelay), and dropped when it is on time.
//
// Planning: every identity may send a host ReputationAfter unknown
// recipients before it is slowed there. A session from an identity with
// room keeps to it (a rejection budget: every RCPT may be refused, so
// windows are small); sessions pick identities with room first
// (PickRoute's prefer), and those with room run side by side. Once every
// identity is spent, every reply waits the delay: the host's sessions
// take the most RCPTs a transaction and a session (no rejection budget,
// no throttle lesson: the late replies those came from are the
// reputation's), and another session runs beside the others as long as
// the queue it takes off them is longer than its own greeting, EHLO,
// MAIL and QUIT at the delay each.
//
// The host's threshold and delay are learnt limits (HostMemory, and the
// fleet's HostLimits with Config.Learnt). Partial: an identity's count of
// unknown recipients and whether it is slowed stay in this process (other
// processes sending through the same proxies do not see them); a host
// known for its reputation is not also taken to count rejections per
// session or transaction.

// egressRep is what one egress identity did at one host.
type egressRep struct {
	unknowns int  // unknown recipients it sent there (ReplyMissing to RCPT)
	reserved int  // of its room, what open sessions may still spend
	slowed   bool // a session's EHLO came late: its reputation there is spent
}

// hostRep is a host's reputation in this process (hostQ.rep).
type hostRep struct {
	by map[string]*egressRep
	// base is the least EHLO round trip from an identity that had sent
	// the host no unknown recipient.
	base time.Duration
	// lateAt: replies came late once an identity had sent this many
	// unknown recipients (a suspicion; 0: none), about lateGap each.
	lateAt  int
	lateGap time.Duration
	// quitting counts the sessions whose identity spent its room and
	// that wait for their QUIT's slowed reply.
	quitting int
}

// repDelay is q's delay before every reply to a spent identity: learnt,
// or as suspected.
func repDelay(q *hostQ) time.Duration {
	if d := q.hs.ReputationDelay; d > 0 {
		return d
	}
	return max(q.rep.lateGap, slowReplyGap)
}

func (r *hostRep) of(egress string) *egressRep {
	if r.by == nil {
		r.by = map[string]*egressRep{}
	}
	e := r.by[egress]
	if e == nil {
		e = &egressRep{}
		r.by[egress] = e
	}
	return e
}

// repSetupReplies: the replies a session waits for before its first
// RCPT's (greeting, EHLO, MAIL), each slowed at a spent identity.
const repSetupReplies = 3

// repSpentGroup: the RCPTs a round trip of a session from a spent
// identity.
const repSpentGroup = 4

// repAfterLocked is the unknown recipients an identity may send q before
// it is slowed: learnt, else, with several identities to choose from,
// suspected; 0: none known. (With one, a suspicion changes nothing but
// the session that tells it: see noteRepliesLocked.)
func (p *Prober) repAfterLocked(q *hostQ) int {
	if q.hs.ReputationDelay > 0 && q.hs.ReputationAfter > 0 {
		return q.hs.ReputationAfter
	}
	if p.routes() > 1 {
		return q.rep.lateAt
	}
	return 0
}

// repRoomLocked is how many more unknown recipients a new session from
// egress may send q before the identity is slowed; -1: no limit known.
func (p *Prober) repRoomLocked(q *hostQ, egress string) int {
	after := p.repAfterLocked(q)
	if after <= 0 {
		return -1
	}
	e := q.rep.by[egress]
	if e == nil {
		return after
	}
	if e.slowed {
		return 0
	}
	return max(0, after-e.unknowns-e.reserved)
}

// repCleanLocked reports whether an identity (one not used at q yet
// counts) has room at q.
func (p *Prober) repCleanLocked(q *hostQ) bool {
	if p.repAfterLocked(q) <= 0 {
		return false
	}
	if p.cfg.PickRoute == nil {
		return p.repRoomLocked(q, p.cfg.Egress) > 0 // (the identity without PickRoute)
	}
	if len(q.rep.by) < p.routes() {
		return true
	}
	for name := range q.rep.by {
		if p.repRoomLocked(q, name) > 0 {
			return true
		}
	}
	return false
}

// repBusyLocked reports whether a session from an identity with room
// at q is running (its room reserved): sessions from spent identities
// wait for it, lest they pick it.
func repBusyLocked(q *hostQ) bool {
	for _, e := range q.rep.by {
		if e.reserved > 0 {
			return true
		}
	}
	return false
}

// repPreferLocked is PickRoute's preference for q's next session: the
// identities with room there; with none, those that are spent (not one
// whose room a running session holds); nil when nothing is known.
func (p *Prober) repPreferLocked(q *hostQ) func(egress string) bool {
	if p.cfg.PickRoute == nil || p.repAfterLocked(q) <= 0 {
		return nil
	}
	clean := p.repCleanLocked(q)
	avoid := map[string]bool{}
	for name, e := range q.rep.by {
		if p.repRoomLocked(q, name) == 0 && (clean || e.reserved > 0) {
			avoid[name] = true
		}
	}
	if len(avoid) == 0 {
		return nil
	}
	return func(egress string) bool { return !avoid[egress] }
}

// helloReputationLocked reads the EHLO round trip of s, a new session to
// q: the host's usual one from an identity that sent it no unknown
// recipient, a confirmed reputation when late from one that did, a
// dropped suspicion (or a forgiven identity) when on time.
func (p *Prober) helloReputationLocked(q *hostQ, s *session) {
	e := q.rep.of(s.egress)
	if e.unknowns == 0 && !e.slowed && q.hs.ReputationDelay > 0 && s.helloRTT >= q.hs.ReputationDelay {
		// Slowed before it sent anything from this process: the host
		// remembers it from before (another process, an earlier run).
		e.slowed = true
		return
	}
	if e.unknowns == 0 && !e.slowed {
		if q.rep.base <= 0 || s.helloRTT < q.rep.base {
			q.rep.base = s.helloRTT
		}
		return
	}
	if q.rep.base <= 0 {
		return
	}
	late := s.helloRTT - q.rep.base
	switch {
	case late >= slowReplyGap:
		e.slowed = true
		after := q.rep.lateAt
		if after <= 0 || after > e.unknowns {
			after = e.unknowns
		}
		p.learnLocked(q, HostState{ReputationAfter: after, ReputationDelay: late})
		p.repKickLocked(q) // its cost model may want more sessions now
	case e.slowed:
		e.slowed, e.unknowns = false, 0 // the host forgave it
	case q.hs.ReputationDelay <= 0 && q.rep.lateAt > 0 && e.unknowns >= q.rep.lateAt:
		// On time from an identity that sent as many: the late replies
		// were a session's or a transaction's budget, not a reputation.
		q.rep.lateAt = 0
	}
}

// fitReputationLocked fits s, a new session to q, to the host's
// reputation: a session from an identity with room keeps to it; at a
// host whose reputation is known, its late replies are expected.
func (p *Prober) fitReputationLocked(q *hostQ, s *session) {
	if p.repAfterLocked(q) <= 0 {
		return
	}
	if q.hs.ReputationDelay > 0 {
		s.txRejCap = 0
		if !s.slowZone {
			s.rejectCap = 0
			if s.rules.rejects {
				s.rejectCap = p.cfg.MaxRejectsPerSession
			}
		}
		s.rules.watchSlow = false
	}
	room := p.repRoomLocked(q, s.egress)
	if room <= 0 {
		if q.hs.ReputationDelay > 0 || !p.repCleanLocked(q) {
			// Every reply waits the delay, pipelined or not: a big group
			// gains nothing and keeps the queue from the sessions beside.
			s.groupCap = repSpentGroup
			s.slowQuit = repDelay(q)
		}
		return
	}
	if s.rejectCap <= 0 || room < s.rejectCap-s.rejects {
		s.rejectCap = s.rejects + room
	}
	s.repReserved, s.repClean = room, true
	q.rep.of(s.egress).reserved += room
}

// endReputationLocked is s's end at q (see releaseRoomLocked).
func (p *Prober) endReputationLocked(q *hostQ, s *session) {
	if s.repQuitting {
		s.repQuitting = false
		q.rep.quitting--
	}
	p.releaseRoomLocked(q, s)
}

// releaseRoomLocked gives back what s reserved of its identity's room,
// and lets the next session from an identity with room start.
func (p *Prober) releaseRoomLocked(q *hostQ, s *session) {
	if !s.repClean {
		return
	}
	s.repClean = false
	e := q.rep.of(s.egress)
	e.reserved = max(0, e.reserved-s.repReserved)
	s.repReserved = 0
	if !repBusyLocked(q) {
		p.repKickLocked(q) // the sessions from spent identities waited for it
	}
}

// repKickLocked starts as many sessions to q as repParallelLocked wants
// (kick starts one at most).
func (p *Prober) repKickLocked(q *hostQ) {
	for range p.maxConns(q) * p.routes() {
		n := q.sessions
		if p.kick(q); q.sessions == n {
			return
		}
	}
}

// noteRepliesLocked counts the unknown recipients of a window's answered
// cmds against the session's identity and reads how late the window
// came: late after unknown recipients, it is a suspicion (see above). It
// reports whether the session should end for another: from an identity
// with room, or one that tells a reputation from a session's budget
// (the window opened a new transaction, which the throttle learnt would
// have answered on time).
func (p *Prober) noteRepliesLocked(q *hostQ, s *session, cmds []cmd) (end bool) {
	e := q.rep.of(s.egress)
	defer func() {
		if a := max(p.repAfterLocked(q), q.rep.lateAt); a > 0 && e.unknowns >= a && s.slowQuit <= 0 {
			// Its identity is spent: the host delays QUIT's reply too.
			s.slowQuit = repDelay(q)
		}
	}()
	// A spent identity's replies are late by design, as are those of a
	// session the cost model sent past the host's error budget; a server
	// that delays each rejection (Exim's, Exchange's) is no reputation.
	expected := q.hs.ReputationDelay > 0 && s.repReserved == 0 && (e.slowed || e.unknowns >= p.repAfterLocked(q))
	expected = expected || s.slowZone || (!s.rules.watchSlow && q.hs.ReputationDelay <= 0)
	late, exempt := windowLate(cmds, s.helloRTT)
	var before []int // the identity's unknown recipients before each reply
	if late-time.Duration(exempt)*inFlowDelay >= slowReplyGap {
		before = make([]int, len(cmds))
	}
	for i := range cmds {
		c := &cmds[i]
		if before != nil {
			before[i] = e.unknowns
		}
		if c.kind == cmdRCPT && commandClass(c.kind, c.reply) == ReplyMissing {
			e.unknowns++
			if s.repReserved > 0 {
				s.repReserved--
				e.reserved = max(0, e.reserved-1)
				if s.repReserved == 0 {
					// Its room is spent: every reply from now on, QUIT's
					// too, waits the delay; the next identity may start.
					s.slowQuit = repDelay(q)
					s.repQuitting = true
					q.rep.quitting++
					defer p.releaseRoomLocked(q, s)
				}
			}
		}
	}
	if expected || before == nil {
		return false
	}
	t := repStart(before, late)
	if t <= 0 {
		return false
	}
	if n := repSlowed(before, t); n > 0 && q.rep.lateGap <= 0 {
		q.rep.lateGap = late / time.Duration(n)
	}
	switch {
	case q.hs.ReputationDelay > 0:
		p.learnLocked(q, HostState{ReputationAfter: t}) // slowed sooner than learnt
	case q.rep.lateAt <= 0 || t < q.rep.lateAt:
		q.rep.lateAt = t
	}
	// A window opening a new transaction at a host whose throttle the
	// session keeps to is on time, unless the delay is not the
	// transaction's: a new session tells whether it is the session's.
	// (At Postfix its error sleep is the session's: nothing to tell.)
	return (cmds[0].kind == cmdRSET && s.txRejCap > 0 && !s.rules.rejects) || (p.routes() > 1 && p.repCleanLocked(q))
}

// windowLate is how much later than round trips of usual the replies of
// a window came, in all, and how many of them a server may have paused
// before by design (flow control: a transaction's first accepted RCPT's,
// as sizeGroupLocked counts them).
func windowLate(cmds []cmd, usual time.Duration) (late time.Duration, exempt int) {
	var prev time.Time
	accepted := false // an RCPT of the transaction was accepted
	for i := range cmds {
		c := &cmds[i]
		wait, due := c.at.Sub(c.sent), usual
		if !prev.IsZero() && prev.After(c.sent) {
			wait, due = c.at.Sub(prev), 0 // pipelined: due right after the one before
		}
		prev = c.at
		late += max(0, wait-due)
		switch {
		case c.kind != cmdRCPT:
			accepted = false
		case c.reply.class() == 2 && !accepted:
			exempt++
			accepted = true
		}
	}
	return late, exempt
}

// repStart is the identity's unknown recipients after which a window
// that came late by late met a reputation delay, given the unknown
// recipients before each of its replies; 0 when none preceded a reply. A
// delay that starts after t slows every reply with t before it; as a
// deliberate delay is at least slowReplyGap, t is the smallest whose
// slowed replies share late with at least that each (or a later one
// that slows the same replies).
func repStart(before []int, late time.Duration) int {
	bound := 0
	for _, b := range before {
		bound = max(bound, b)
	}
	for t := 1; t <= bound; t++ {
		if n := repSlowed(before, t); late/time.Duration(n) >= slowReplyGap {
			for t < bound && repSlowed(before, t+1) == n {
				t++
			}
			return t
		}
	}
	return bound
}

// repSlowed is the replies a delay that starts after t unknown
// recipients slows, given those before each reply.
func repSlowed(before []int, t int) int {
	n := 0
	for _, b := range before {
		if b >= t {
			n++
		}
	}
	return n
}

// repTakeLocked is the most items a session to q takes before it
// starts: a session from a spent identity takes a small group, leaving
// the rest to the sessions beside it (math.MaxInt: no bound).
func (p *Prober) repTakeLocked(q *hostQ) int {
	if p.repAfterLocked(q) > 0 && !p.repCleanLocked(q) {
		return repSpentGroup
	}
	return math.MaxInt
}

// repParallelLocked decides whether another session to q, beside the
// running ones, shortens its work at a host whose reputation is known
// (ok false: not such a host; the other rules decide). A session from
// an identity with room costs no delay. With every identity spent, each
// reply of each session waits the delay, sessions side by side: with k
// running and n replies queued, they need n delays each shared by k,
// against (n+repSetupReplies)/(k+1) with one more, whose greeting, EHLO
// and MAIL come first: one more is sooner while n > repSetupReplies*k.
func (p *Prober) repParallelLocked(q *hostQ) (want, ok bool) {
	if p.repAfterLocked(q) <= 0 {
		return false, false
	}
	if p.repCleanLocked(q) || repBusyLocked(q) {
		// One at a time (those waiting for the reply to their QUIT
		// aside): a session from an identity with room meets no delay,
		// and two could pick the same identity.
		return q.sessions == q.rep.quitting, true
	}
	return q.n > repSetupReplies*q.sessions, true
}
