package mxdns

import (
	"context"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Retransmission within an attempt. A UDP query or its answer lost on the
// way (a resolver's receive buffer overflowing while many workers start
// at once, a congested link) used to cost the whole attempt's Timeout;
// now the query is sent again on the same socket, with the same ID, each
// time a retransmission timeout passes without an answer, doubling it each
// time, until the attempt's Timeout. An answer to any of the copies ends
// the wait. The timeout follows the server's measured answer times the way
// TCP's does (RFC 6298: smoothed round trip plus four times its variation),
// so a slow resolver is not sent more copies than a fast one, and starts at
// initialRTO before the first answer was timed.
const (
	initialRTO = time.Second
	minRTO     = 300 * time.Millisecond
)

// rttEstimator is the smoothed answer time of the resolver and its
// variation (RFC 6298 §2).
type rttEstimator struct {
	mu           sync.Mutex
	srtt, rttvar time.Duration
	sampled      bool
	initial      time.Duration // before the first sample; 0: initialRTO (tests shorten it)
}

// rto is the wait for an answer before the query is sent again, at most
// limit.
func (e *rttEstimator) rto(limit time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := initialRTO
	if e.initial > 0 {
		d = e.initial
	}
	if e.sampled {
		d = max(minRTO, e.srtt+4*e.rttvar)
	}
	return min(d, limit)
}

// sample records one answer's time, taken from the first copy sent: an
// answer to a later copy counts as slower than it was (Karn's problem),
// which errs towards fewer copies.
func (e *rttEstimator) sample(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.sampled {
		e.srtt, e.rttvar, e.sampled = d, d/2, true
		return
	}
	diff := e.srtt - d
	if diff < 0 {
		diff = -diff
	}
	e.rttvar = (3*e.rttvar + diff) / 4
	e.srtt = (7*e.srtt + d) / 8
}

// sendUDP sends m on co and reads until its answer comes, sending copies
// as the retransmission timeout says, within the attempt's Timeout and
// ctx. Answers with other IDs (late answers to earlier queries on a reused
// socket) are skipped.
func (r *Resolver) sendUDP(ctx context.Context, co *dns.Conn, m *dns.Msg) (*dns.Msg, error) {
	co.UDPSize = ednsSize
	start := r.cfg.Clock.Now()
	deadline := start.Add(r.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// A cancelled ctx wakes the read at once. Its error is set before the
	// function runs, so the check after each SetReadDeadline below cannot
	// miss it.
	stop := context.AfterFunc(ctx, func() { co.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rto := r.rtt.rto(r.cfg.Timeout)
	for copies := 0; ; copies++ {
		if copies > 0 {
			r.queries.Add(1)
			r.retransmits.Add(1)
		}
		co.SetWriteDeadline(deadline)
		if err := co.WriteMsg(m); err != nil {
			return nil, err
		}
		wake := r.cfg.Clock.Now().Add(rto)
		if wake.After(deadline) {
			wake = deadline
		}
		co.SetReadDeadline(wake)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		resp, err := readAnswer(co, m.Id)
		if err == nil {
			r.rtt.sample(r.cfg.Clock.Since(start))
			return resp, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if !isTimeout(err) || !r.cfg.Clock.Now().Before(deadline) {
			return nil, err
		}
		rto *= 2
	}
}

// readAnswer reads from co until the answer with ID id, an error or the
// read deadline.
func readAnswer(co *dns.Conn, id uint16) (*dns.Msg, error) {
	for {
		resp, err := co.ReadMsg()
		if err != nil || resp.Id == id {
			return resp, err
		}
	}
}
