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
// whose refused RCPTs were followed by more RCPTs, met a throttle: it
// started at most at that many refusals.
func (p *Prober) sizeGroupLocked(q *hostQ, s *session, cmds []cmd, carried int) {
	if !s.pipelining {
		return
	}
	late := s.rtt - s.helloRTT - time.Duration(s.exempt)*inFlowDelay
	bound := refusedBeforeLast(cmds, carried)
	if s.rules.watchSlow && late >= slowReplyGap && bound > 0 {
		p.learnLocked(q, HostState{RejectsPerTransaction: bound})
		s.txRejCap = q.hs.RejectsPerTransaction
		q.group = max(1, s.group/2)
		s.group = q.group
		return
	}
	answered := 0
	for i := range cmds {
		if cmds[i].kind == cmdRCPT && classifyRcpt(cmds[i].reply) != kindTooMany {
			answered++
		}
	}
	q.group = min(p.cfg.PipelineDepth, max(p.groupLocked(q), s.group)+answered)
	s.group = q.group
}

// refusedBeforeLast returns the most refused RCPTs of one transaction of
// the window that were followed by another RCPT reply of the same
// transaction: the refusals a throttle may have started after. carried
// counts the open transaction's refusals before the window.
func refusedBeforeLast(cmds []cmd, carried int) int {
	best, cur := 0, carried
	for i := range cmds {
		c := &cmds[i]
		if c.kind != cmdRCPT {
			cur = 0 // RSET or MAIL: a new transaction
			continue
		}
		best = max(best, cur)
		if c.counted {
			cur++
		}
	}
	return best
}
