package realmta

import (
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"time"
)

// HostSettled waits (up to timeout) until the host's log shows the end of
// every session it shows the start of, and nothing more for a moment, and
// returns its counts: a test that ran sessions against one host while
// other hosts of the world are busy (so that SettledCounts would wait for
// all of them) reads its own host's view with it.
func (r *Running) HostSettled(name string, timeout time.Duration) (HostCounts, error) {
	if _, ok := r.host(name); !ok {
		return HostCounts{}, fmt.Errorf("realmta: no host %q", name)
	}
	deadline := time.Now().Add(timeout)
	var last HostCounts
	stable := 0
	for {
		c, err := r.Counts()
		if err != nil {
			return HostCounts{}, err
		}
		hc := *c.Hosts[name]
		if hc.Disconnects >= hc.Sessions && sameCounts(hc, last) {
			stable++
		} else {
			stable = 0
		}
		if stable >= 2 {
			return hc, nil
		}
		if time.Now().After(deadline) {
			return hc, fmt.Errorf("realmta: %s: log not settled after %v (%d sessions, %d ended)", name, timeout, hc.Sessions, hc.Disconnects)
		}
		last = hc
		time.Sleep(150 * time.Millisecond)
	}
}

func sameCounts(a, b HostCounts) bool {
	return a.Sessions == b.Sessions && a.Disconnects == b.Disconnects && a.RCPT == b.RCPT && a.QueueFiles == b.QueueFiles &&
		a.AnvilRefused == b.AnvilRefused && a.TooManyNonmail == b.TooManyNonmail
}

// SpendFlowTokens makes the Postfix instance's queue look like a quiet
// MX's: it runs transactions with an accepted RCPT at host (a Postfix host
// serving a domain with a mailbox or a catch-all) until one waits
// in_flow_delay after others did not, i.e. until the instance's
// flow-control tokens are spent: the queue manager fills the pool up to
// default_process_limit when it starts and whenever it runs with its
// incoming queue idle (qmgr.c: its wake-ups, every 300s from master, or a
// message queued, which never happens here), and a transaction that opens
// a queue file takes one. (A transaction before the queue manager's first
// run waits too: that one does not count.) From then on every new transaction with an accepted
// RCPT, at any Postfix host of the world, waits in_flow_delay (1s by
// default) at that RCPT. It returns the transactions it took. Its
// connections come from 127.B.0.38, so anvil counts them apart from a
// verifier's (and per listener anyway).
func (r *Running) SpendFlowTokens(host string) (int, error) {
	h, ok := r.host(host)
	if !ok || h.Software != Postfix || h.silent() || h.Postscreen || h.Greylist {
		return 0, fmt.Errorf("realmta: SpendFlowTokens: %q is not a plain Postfix host of the world", host)
	}
	rcpt := ""
	for _, d := range r.World.Domains {
		if d.Host == host && !d.Policy {
			switch {
			case d.CatchAll:
				rcpt = "spend@" + d.Name
			case len(d.Mailboxes) > 0:
				rcpt = d.Mailboxes[0] + "@" + d.Name
			}
		}
	}
	if rcpt == "" {
		return 0, fmt.Errorf("realmta: SpendFlowTokens: %s serves no mailbox", host)
	}
	if d := r.opt.PostfixMain["in_flow_delay"]; d == "0" || d == "0s" {
		return 0, errors.New("realmta: SpendFlowTokens: in_flow_delay is off")
	}
	const limit = 2000 // far more than any default_process_limit here
	n, fast := 0, 0
	for n < limit {
		slow, k, f, err := r.spendSession(host, rcpt, limit-n, fast > 0)
		n, fast = n+k, fast+f
		if err != nil || slow {
			return n, err
		}
	}
	return n, errors.New("realmta: SpendFlowTokens: no transaction waited in_flow_delay")
}

// spendSession runs up to most transactions in one session (fewer than
// smtpd_junk_command_limit RSETs), reporting whether the last one waited
// after one that did not (in this session or before: sawFast), and the
// transactions that did not.
func (r *Running) spendSession(host, rcpt string, most int, sawFast bool) (slow bool, n, fast int, err error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: r.opt.addr(0, 38).AsSlice()}}
	nc, err := d.Dial("tcp", r.HostAddr(host))
	if err != nil {
		return false, 0, 0, err
	}
	defer nc.Close()
	tp := textproto.NewConn(nc)
	cmd := func(line string, want int) (time.Duration, error) {
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		t0 := time.Now()
		if line != "" {
			if err := tp.PrintfLine("%s", line); err != nil {
				return 0, err
			}
		}
		code, msg, err := tp.ReadResponse(want)
		if err != nil {
			return 0, fmt.Errorf("realmta: SpendFlowTokens: %q: %d %s: %w", line, code, strings.TrimSpace(msg), err)
		}
		return time.Since(t0), nil
	}
	if _, err := cmd("", 220); err != nil {
		return false, 0, 0, err
	}
	if _, err := cmd("EHLO spend.realmta.test", 250); err != nil {
		return false, 0, 0, err
	}
	for n < min(most, 40) {
		if _, err := cmd("MAIL FROM:<spend@realmta.test>", 250); err != nil {
			return false, n, fast, err
		}
		took, err := cmd("RCPT TO:<"+rcpt+">", 250)
		if err != nil {
			return false, n, fast, err
		}
		n++
		if took <= 700*time.Millisecond {
			fast++
		} else if sawFast || fast > 0 {
			_, _ = cmd("QUIT", 221)
			return true, n, fast, nil
		}
		if _, err := cmd("RSET", 250); err != nil {
			return false, n, fast, err
		}
	}
	_, _ = cmd("QUIT", 221)
	return false, n, fast, nil
}
