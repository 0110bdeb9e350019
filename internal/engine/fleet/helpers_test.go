package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
)

// redisURL returns a URL on the test Redis with a key prefix of the
// test's own, whose keys are deleted at the end (redistest: under CI=true
// an unreachable Redis fails the test).
func redisURL(t testing.TB) string {
	t.Helper()
	return redistest.URL(t, "fleettest")
}

func testPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fleettest:" + hex.EncodeToString(b[:]) + ":"
}

// deletePrefix is what a Redis restart without persistence does to
// prefix's keys.
func deletePrefix(rdb *redis.Client, prefix string) { redistest.DeletePrefix(rdb, prefix) }

func fastOptions() Options {
	return Options{LeaseTTL: time.Second, HealthInterval: 100 * time.Millisecond, FailAfter: 2}
}

// span is one lease held for a connection (from the end of Take, slot
// and rate had, to release) and the time its connection started (the
// same in hammer).
type span struct {
	from, to time.Time
	start    time.Time
	who      string // the holder, when the test names it
	lost     bool   // the lease was lost before its release
}

// recorder collects spans from several holders.
type recorder struct {
	mu    sync.Mutex
	spans []span
}

func (r *recorder) add(s span) {
	r.mu.Lock()
	r.spans = append(r.spans, s)
	r.mu.Unlock()
}

// maxConcurrent is the most spans open at once.
func maxConcurrent(spans []span) int {
	type ev struct {
		t time.Time
		d int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.from, +1}, ev{s.to, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t.Equal(evs[j].t) {
			return evs[i].d < evs[j].d // releases first
		}
		return evs[i].t.Before(evs[j].t)
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.d
		most = max(most, n)
	}
	return most
}

// maxStartsIn is the most connection starts within any window w.
func maxStartsIn(spans []span, w time.Duration) int {
	var ts []time.Time
	for _, s := range spans {
		ts = append(ts, s.start)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// hammer takes a lease and the rate (Take, as the engine does), holds for
// hold and releases (early when the lease ends) until ctx ends, recording
// each connection it would have had (from the end of Take).
func hammer(ctx context.Context, lm Limiter, k Key, lim Limits, hold time.Duration, rec *recorder) error {
	return hammerAs(ctx, "", lm, k, lim, func() time.Duration { return hold }, rec)
}

// hammerAs is hammer with its spans named who, each lease held for hold(),
// asked once the lease is had (0: until it is lost or ctx ends).
func hammerAs(ctx context.Context, who string, lm Limiter, k Key, lim Limits, hold func() time.Duration, rec *recorder) error {
	for ctx.Err() == nil {
		l, err := Take(ctx, lm, k, lim)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		from := time.Now()
		start := from
		if dl, ok := l.Deadline(); ok && !start.Before(dl) {
			l.Release() // the turn ended while waiting for the rate: no connection
			continue
		}
		var held <-chan time.Time // nil: until lost
		var t *time.Timer
		if d := hold(); d > 0 {
			t = time.NewTimer(d)
			held = t.C
		}
		select {
		case <-held:
		case <-l.Lost():
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		to := time.Now()
		lost := false
		select {
		case <-l.Lost():
			lost = true
		default:
		}
		l.Release()
		rec.add(span{from: from, to: to, start: start, who: who, lost: lost})
	}
	return nil
}

// cutter is a TCP relay to Redis that can be cut (every connection
// closed, nothing accepted) and restored on the same port: a backend
// that goes away and comes back.
type cutter struct {
	t      testing.TB
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
}

func newCutter(t testing.TB) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{t: t, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	c.serve(ln)
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) serve(ln net.Listener) {
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", redistest.Addr)
			if err != nil {
				in.Close()
				continue
			}
			// A connection accepted before a cut and relayed after it
			// (the dial to Redis took a while: a loaded machine) would
			// survive the cut: its process would keep a working backend,
			// and its shared leases, while the others fall back (under
			// load: "3 connections at once", or no fallback at all).
			c.mu.Lock()
			if c.ln != ln {
				c.mu.Unlock()
				in.Close()
				out.Close()
				continue
			}
			c.conns[in], c.conns[out] = struct{}{}, struct{}{}
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// cut closes the listener and every relayed connection.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for conn := range c.conns {
		conn.Close()
	}
	c.conns = map[net.Conn]struct{}{}
}

// restore listens on the same port again.
func (c *cutter) restore() {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatalf("listen again on %s: %v", c.addr, err)
	}
	c.serve(ln)
}

func (c *cutter) url(prefix string) string {
	return fmt.Sprintf("redis://%s/%d?prefix=%s", c.addr, redistest.DB, prefix)
}

// waitFor polls cond until it holds or d passes: for what a real backend
// (a Redis cut and restored) does on its own clock.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	realtime.Eventually(t, d, what, cond)
}
