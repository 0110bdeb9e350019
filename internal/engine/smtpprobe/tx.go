package smtpprobe

import (
	"fmt"
	"math"
	"time"
)

// A window is what a session sends in one round trip: the RCPTs of some
// items, in transactions. The open transaction (MAIL accepted and no RSET
// since) takes RCPTs until it holds the host's limit per transaction; then
// RSET and a new MAIL open the next. RFC 2920 lets a client pipeline RSET,
// MAIL and RCPT anywhere in a group, so a window may open several.

// segment is the part of a window that goes into one transaction: an RSET
// (closing the transaction before) and a MAIL when it opens a new one.
type segment struct {
	rset, mail, utf8 bool
	items            []*item
}

// cmdKind is a command of a window.
type cmdKind uint8

const (
	cmdRSET cmdKind = iota
	cmdMAIL
	cmdRCPT
)

// cmd is one command of a window and, once read, its reply.
type cmd struct {
	kind    cmdKind
	utf8    bool  // MAIL: with SMTPUTF8
	it      *item // RCPT: the address asked about
	txPos   int   // RCPT: its number in its transaction; RSET: its number among the session's non-mail commands (1-based)
	reply   reply
	counted bool // the reply counted as a rejection
	// sent and at: when the command left (flushed) and its reply came,
	// for the reply latencies a reputation delay shows in (reputation.go).
	sent, at time.Time
}

// rejectRoom is the number of rejections the session may still get.
func (s *session) rejectRoom() int {
	if s.rejectCap <= 0 {
		return math.MaxInt
	}
	return s.rejectCap - s.rejects
}

// nonmailRoom is the number of RSETs the session may still send.
func (s *session) nonmailRoom() int {
	if s.nonmailCap <= 0 {
		return math.MaxInt
	}
	return s.nonmailCap - s.nonmail
}

// txRejectRoom is the number of RCPTs the open transaction may still
// carry at a host that throttles after refused recipients.
func (s *session) txRejectRoom() int {
	if s.txRejCap <= 0 {
		return math.MaxInt
	}
	return s.txRejCap - s.txRejects
}

// probeRoom is the number of RCPTs a window may add to the open
// transaction while the host's limit per transaction is not known.
func (s *session) probeRoom() int {
	if s.txStep <= 0 {
		return math.MaxInt
	}
	return max(s.txSafe, s.txRcpts) + s.txStep - s.txRcpts
}

// depth is the number of RCPTs per round trip.
func (s *session) depth() int {
	if !s.pipelining {
		return 1
	}
	if s.groupCap > 0 {
		return max(1, min(s.group, s.groupCap))
	}
	return max(1, s.group)
}

// plan lays items out in transactions (see layout) and returns the items
// that did not fit.
func (s *session) plan(items []*item, txCap int) (segs []segment, rest []*item) {
	utf8 := false
	if s.smtputf8 {
		for _, it := range items {
			if !isASCII(it.addr) {
				utf8 = true
				break
			}
		}
	}
	i := 0
	for _, sh := range s.layout(len(items), txCap, utf8) {
		sh.items = items[i : i+sh.n]
		i += sh.n
		segs = append(segs, sh.segment)
	}
	return segs, items[i:]
}

// shape is a segment before its items are chosen: n RCPTs.
type shape struct {
	segment
	n int
}

// layout lays n RCPTs out in transactions: the open one's room first
// (unless they need SMTPUTF8 and its MAIL did not carry it), then new ones
// of at most txCap RCPTs, each opened by [RSET,] MAIL. Every RCPT may be
// refused, so there are no more than the rejection budget allows; every
// RSET is a non-mail command, within that budget. A MAIL is refused only
// by a host that refuses the client (a rate limit, a full disk: the
// session ends there), and then its pipelined RCPTs get 503, errors too:
// so MAILs are at most the rejection budget as well, and a window can make
// at most twice the budget of errors (18 at Postfix's default, short of
// its smtpd_hard_error_limit of 20). A transaction after a 452 that ended
// the session's first one gets a single RCPT: it tells a limit per
// transaction from one per session. At a host with a bad-recipient
// throttle (session.txRejCap) a transaction takes no more RCPTs in a
// window than may still be refused before the throttle starts: the open
// one what its refusals so far leave, a new one the whole budget. It may
// place fewer than n.
func (s *session) layout(n, txCap int, utf8 bool) []shape {
	var out []shape
	rej, nonmail := s.rejectRoom(), s.nonmailRoom()
	mails := rej
	open := s.inTx
	placed := 0
	newCap := txCap
	if s.txRejCap > 0 {
		// A host that throttles after refused recipients: a transaction
		// takes no more RCPTs in a window than it may still refuse
		// before the throttle, all of a new one's possibly refused.
		newCap = min(txCap, s.txRejCap)
	}
	if s.txStep > 0 {
		// The host's limit per transaction is not known: a window takes
		// a transaction at most txStep past what one took there.
		newCap = min(newCap, s.txSafe+s.txStep)
	}
	if room := min(txCap-s.txRcpts, s.txRejectRoom(), s.probeRoom()); s.inTx && room > 0 && (!utf8 || s.txUTF8) {
		if k := min(room, n, rej); k > 0 {
			out = append(out, shape{segment{utf8: s.txUTF8}, k})
			placed, rej = k, rej-k
		}
		if s.txStep > 0 {
			// Probing the host's limit: one transaction a window, so
			// that its replies come in the order the host counts them
			// (a throttle's pause shows before an RCPT's reply, not
			// hidden behind a MAIL's).
			return out
		}
	}
	for placed < n && rej >= 1 && mails >= 1 && (!open || nonmail > 0) {
		k := min(newCap, n-placed, rej)
		if s.probeTx {
			k = 1
		}
		out = append(out, shape{segment{rset: open, mail: true, utf8: utf8}, k})
		if open {
			nonmail--
		}
		open = true
		placed += k
		rej -= k
		mails--
		if s.probeTx || s.txStep > 0 {
			break
		}
	}
	return out
}

// capacity is the number of RCPTs the next window can carry at most.
func (s *session) capacity(txCap, sessionCap int) int {
	n := min(s.depth(), sessionCap-s.rcpts)
	if n <= 0 {
		return 0
	}
	total := 0
	for _, sh := range s.layout(n, txCap, false) {
		total += sh.n
	}
	return total
}

// commands turns segments into the window's commands and counts them as
// sent.
func (s *session) commands(segs []segment) []cmd {
	var cmds []cmd
	for _, sg := range segs {
		if sg.rset {
			s.nonmail++
			cmds = append(cmds, cmd{kind: cmdRSET, txPos: s.nonmail})
			s.p.st.rsets.Add(1)
			s.inTx = false
		}
		if sg.mail {
			cmds = append(cmds, cmd{kind: cmdMAIL, utf8: sg.utf8})
			s.p.st.mails.Add(1)
			s.inTx, s.txUTF8, s.txRcpts, s.txQueued = true, sg.utf8, 0, false
		}
		for _, it := range sg.items {
			s.txRcpts++
			s.rcpts++
			s.p.st.rcpts.Add(1)
			cmds = append(cmds, cmd{kind: cmdRCPT, it: it, txPos: s.txRcpts})
		}
	}
	return cmds
}

func (s *session) writeCmd(c *cmd) {
	switch c.kind {
	case cmdRSET:
		s.bw.WriteString("RSET\r\n")
	case cmdMAIL:
		s.bw.WriteString("MAIL FROM:")
		s.bw.WriteString(s.p.mailFrom)
		if c.utf8 {
			s.bw.WriteString(" SMTPUTF8")
		}
		s.bw.WriteString("\r\n")
	case cmdRCPT:
		s.bw.WriteString("RCPT TO:<")
		s.bw.WriteString(c.it.addr)
		s.bw.WriteString(">\r\n")
	}
}

// send sends a window's commands, all in one write when the server offers
// PIPELINING, else one at a time, and reads their replies. It returns how
// many got their reply. Without PIPELINING it stops after a refused RSET or
// MAIL (the RCPTs would only get 503); it stops reading after a 421 (the
// server is closing the connection). The rest are unsent, with a nil error.
func (s *session) send(cmds []cmd) (int, error) {
	t0 := s.p.clk.Now()
	var w slowWatch
	s.exempt = 0
	step := len(cmds)
	if !s.pipelining {
		step = 1
	}
	for i := 0; i < len(cmds); {
		if err := s.arm(s.p.cfg.CommandTimeout); err != nil {
			return i, s.fail(err)
		}
		end := min(i+step, len(cmds))
		for j := i; j < end; j++ {
			s.writeCmd(&cmds[j])
		}
		if err := s.bw.Flush(); err != nil {
			return i, s.fail(err)
		}
		sent := s.p.clk.Now()
		for j := i; j < end; j++ {
			cmds[j].sent = sent
		}
		for ; i < end; i++ {
			c := &cmds[i]
			if i > 0 && s.pipelining {
				// Each reply gets its own CommandTimeout: a server may
				// pause before some (Postfix's error sleep and flow
				// control, Exchange's tarpit).
				if err := s.arm(s.p.cfg.CommandTimeout); err != nil {
					return i, s.fail(err)
				}
			}
			r, err := s.read()
			if err != nil {
				return i, err
			}
			c.reply, c.at = r, s.p.clk.Now()
			if c.counted = c.kind != cmdRSET && r.class() != 2 && !(c.kind == cmdRCPT && classifyRcpt(r) == kindTooMany); c.counted {
				// An error of the session for Postfix. "452 4.5.3 too many
				// recipients" is not, until smtpd_recipient_overshoot_limit
				// (1000) of them (smtpd.c rcpt_cmd).
				s.rejects++
			}
			switch {
			case c.kind == cmdMAIL:
				s.txRejects = 0
			case c.kind == cmdRCPT && c.counted:
				s.txRejects++
			}
			if err := w.check(s, c); err != nil {
				return i + 1, err
			}
			switch {
			case r.code == 421:
				s.broken = true
				return i + 1, nil
			case !s.pipelining && c.kind != cmdRCPT && r.class() != 2:
				return i + 1, nil
			}
		}
	}
	s.rtt = s.p.clk.Since(t0)
	return len(cmds), nil
}

// slowedError: a server began holding back its replies after the session
// had made some errors (rejects: those before the first held-back reply) (Postfix's smtpd_soft_error_limit with a banner
// that does not say Postfix). The session is dropped at once.
type slowedError struct {
	rejects int
	gap     time.Duration // the pause before the held reply
}

func (e *slowedError) Error() string {
	return fmt.Sprintf("smtpprobe: server slowed its replies down after %d rejections in the session", e.rejects)
}

// slowReplyGap is a pause between two pipelined replies long enough to
// mean a server holds replies back on purpose (Postfix: a second).
const slowReplyGap = 700 * time.Millisecond

// minRejectsBeforeSlow: fewer rejections than this do not explain a slow
// reply (a slow lookup at the server might).
const minRejectsBeforeSlow = 3

// slowWatch notices a server that starts holding its replies back: a
// reply slowReplyGap after the one before, once the session has made
// enough errors to explain it. Two pauses are the server's flow control,
// not an error budget, and do not count: before a MAIL's reply and before
// the first accepted RCPT of a transaction, where Postfix opens the queue
// file (smtpd_delay_open_until_valid_rcpt, default yes) and its cleanup
// server waits in_flow_delay (1s) while the queue is not draining.
type slowWatch struct{ prev time.Time }

func (w *slowWatch) check(s *session, c *cmd) error {
	now := s.p.clk.Now()
	gap, first := now.Sub(w.prev), w.prev.IsZero()
	w.prev = now
	exempt := false
	switch c.kind {
	case cmdMAIL:
		exempt = true
	case cmdRCPT:
		if c.reply.class() == 2 && !s.txQueued {
			s.txQueued, exempt = true, true
			s.exempt++
		}
	}
	before := s.rejects // rejections before this reply
	if c.counted {
		before--
	}
	if first || exempt || !s.pipelining || !s.rules.watchSlow || gap < slowReplyGap || before < minRejectsBeforeSlow {
		return nil
	}
	s.broken = true
	return &slowedError{rejects: before, gap: gap}
}
