package smtpprobe

import "time"

// Groups sized to the host. A pipelined group is answered, by some
// servers, only once all of it was processed; a server with a
// bad-recipient throttle sleeps before every reply once a transaction has
// had a few refused recipients. A big first group to such a host waits
// for all its sleeps before a single reply comes. So a host nothing is
// known about gets a modest group (Config.PipelineStart), which grows with
// what the host answers, and a group whose replies came late after
// refused recipients teaches the host's throttle: transactions from then
// on hold no more RCPTs than may be refused before it starts (new
// transactions rather than sleeps), and the group is halved.

// inFlowDelay is the pause a server may take, by design, before the first
// accepted RCPT of a transaction (Postfix's in_flow_delay, 1s): a group
// is late only beyond those.
const inFlowDelay = time.Second

// groupLocked is q's group: RCPTs a round trip.
func (p *Prober) groupLocked(q *hostQ) int {
	if q.group <= 0 {
		return p.cfg.PipelineStart
	}
	return min(q.group, p.cfg.PipelineDepth)
}

// sizeGroupLocked resizes q's group after a window of s whose replies all
// came (cmds; carried: refused RCPTs of the open transaction before it).
// A window that took longer than the EHLO round trip, the flow-control
// pauses it may have had and slowReplyGap, and that holds a transaction
// whose refused RCPTs were followed by more RCPTs, met a throttle (see
// throttleStart).
func (p *Prober) sizeGroupLocked(q *hostQ, s *session, cmds []cmd, carried int) {
	if !s.pipelining {
		return
	}
	// Late beyond the pauses the server may have taken by design, the
	// window met a throttle; how many replies it slept before is
	// estimated from all its lateness (flow control may not have paused).
	late := s.rtt - s.helloRTT
	onTime := late-time.Duration(s.exempt)*inFlowDelay < slowReplyGap
	if t := throttleStart(cmds, carried, late); s.rules.watchSlow && !onTime && t > 0 {
		p.learnLocked(q, HostState{RejectsPerTransaction: t})
		s.txRejCap = q.hs.RejectsPerTransaction
		q.group = max(1, s.group/2)
		s.group = q.group
		return
	}
	answered := 0
	for i := range cmds {
		if cmds[i].kind != cmdRCPT {
			continue
		}
		if classifyRcpt(cmds[i].reply) == kindTooMany {
			// The group met the host's limit: it grows again only
			// after a group the host took whole.
			answered = 0
			break
		}
		answered++
	}
	q.group = min(p.cfg.PipelineDepth, max(p.groupLocked(q), s.group)+answered)
	s.group = q.group
}

// throttleStart returns the number of refused RCPTs of a transaction
// after which a window that came late by late met a throttle, 0 when it
// did not (on time, or no refusal was followed by another RCPT of its
// transaction). A throttle that starts after t refusals sleeps before
// each later reply of the transaction: slept(t) replies. It started at
// most at the most refusals of one transaction that were followed by
// another RCPT (the replies after the last refusal came on time
// otherwise), and, as a deliberate sleep is at least slowReplyGap, at the
// smallest t whose slept(t) replies share late with at least that each
// (or the largest t that holds the same replies back).
// carried counts the open transaction's refusals before the window.
func throttleStart(cmds []cmd, carried int, late time.Duration) int {
	if late < slowReplyGap {
		return 0
	}
	before := refusalsBefore(cmds, carried)
	bound := 0
	for _, b := range before {
		bound = max(bound, b)
	}
	slept := func(t int) int {
		n := 0
		for _, b := range before {
			if b >= t {
				n++
			}
		}
		return n
	}
	for t := 1; t <= bound; t++ {
		if n := slept(t); late/time.Duration(n) >= slowReplyGap {
			// A later start that would have held the same replies is
			// as consistent, and costs fewer transactions.
			for t < bound && slept(t+1) == n {
				t++
			}
			return t
		}
	}
	return bound
}

// refusalsBefore returns, for each RCPT of the window, the refused RCPTs
// of its transaction before it.
func refusalsBefore(cmds []cmd, carried int) []int {
	var out []int
	cur := carried
	for i := range cmds {
		c := &cmds[i]
		if c.kind != cmdRCPT {
			cur = 0 // RSET or MAIL: a new transaction
			continue
		}
		out = append(out, cur)
		if c.counted {
			cur++
		}
	}
	return out
}
