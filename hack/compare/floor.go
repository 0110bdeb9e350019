package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// sessionFloor is a lower bound on the wall time of any verifier that
// checks every mailbox of the list over SMTP with at most conc sessions
// open at once, computed from the world's own timings. It ignores DNS,
// CPU, per-host politeness and greylisting, so real engines sit above it.
type sessionFloor struct {
	groups, sessions int              // MX host groups with mailboxes to check; fewest sessions they allow
	busy             time.Duration    // summed session time at that minimum
	floor            time.Duration    // busy spread over conc slots (or the longest session)
	perRow           time.Duration    // the same bound for one session per row (AfterShip's way)
	polite           time.Duration    // the busiest host under our default per-host limits
	limits           smtpprobe.Config // those limits: smtpprobe's defaults, which the worker's flags take
	politeHost       string           // which group that is
}

// computeSessionFloor counts, per group of MX hosts (a provider's, or a
// domain's own), the mailboxes the list asks about plus one catch-all probe
// per domain, and the fewest sessions the group's RCPT limit allows. The
// shortest session the world permits is its greeting (delay plus one round
// trip), EHLO, and one pipelined window carrying every transaction: three
// round trips and the delay. One session per row, without pipelining,
// pays EHLO, MAIL, a catch-all RCPT and the RCPT: five round trips.
func computeSessionFloor(doms []mailworld.Domain, rows []string, conc int) sessionFloor {
	byName := make(map[string]*mailworld.Domain, len(doms))
	for i := range doms {
		byName[doms[i].Name] = &doms[i]
	}
	type group struct {
		d       *mailworld.Domain
		rcpts   int
		rejects int // replies other than 2xx: what a Postfix host counts
		probed  map[string]bool
	}
	behaviour := mailboxBehaviours()
	groups := map[string]*group{}
	var perRowBusy time.Duration
	for _, row := range rows {
		addr := strings.ToLower(verify.TrimPadding(row))
		at := strings.LastIndexByte(addr, '@')
		if at < 0 {
			continue
		}
		d := byName[addr[at+1:]]
		if d == nil || !reachesRCPT(d) {
			continue
		}
		key := d.Provider
		if key == "" {
			key = d.Name
		}
		g := groups[key]
		if g == nil {
			g = &group{d: d, probed: map[string]bool{}}
			groups[key] = g
		}
		g.rcpts++
		if b := behaviour(d, addr[:at]); d.PolicyReject || d.Greylist > 0 || (b != mailworld.Exists && b != mailworld.CatchAll) {
			g.rejects++
		}
		if !g.probed[d.Name] {
			g.probed[d.Name] = true
			g.rcpts++
			if d.DefaultBehaviour != mailworld.CatchAll {
				g.rejects++
			}
		}
		perRowBusy += d.GreetingDelay + 5*d.Latency
	}
	f := sessionFloor{limits: smtpprobe.New(smtpprobe.Config{}).Config()}
	var longest time.Duration
	for key, g := range groups {
		n := 1
		if lim := g.d.RcptLimit; lim > 0 {
			n = (g.rcpts + lim - 1) / lim
		}
		one := g.d.GreetingDelay + 3*g.d.Latency + g.d.InFlowDelay // flow control: a queue file a session at least
		f.groups++
		f.sessions += n
		f.busy += time.Duration(n) * one
		longest = max(longest, one)
		if p := politeFloor(f.limits, g.d, g.rcpts, g.rejects, one); p > f.polite {
			f.polite, f.politeHost = p, key
		}
	}
	f.floor = max(f.busy/time.Duration(conc), longest)
	f.perRow = perRowBusy / time.Duration(conc)
	return f
}

// politeFloor is the least time our engine at its default limits needs for
// a group's rcpts: its sessions (of at most the host's RCPT limit, or our
// own, and at a Postfix host at most MaxRejectsPerSession rejections each)
// spread over its MX hosts of equal preference (else all on one), each host
// opening its first MaxConnsPerHost at once and the rest at RatePerHost
// a second, the last taking one session's time.
func politeFloor(c smtpprobe.Config, d *mailworld.Domain, rcpts, rejects int, one time.Duration) time.Duration {
	per := c.MaxRcptPerSession
	if d.RcptLimit > 0 {
		per = min(per, d.RcptLimit)
	}
	sessions := (rcpts + per - 1) / per
	if d.SoftErrors > 0 {
		sessions = max(sessions, (rejects+c.MaxRejectsPerSession-1)/c.MaxRejectsPerSession)
	}
	hosts := 1
	if d.EqualPrefs && d.MXHosts > 1 {
		hosts = d.MXHosts
	}
	perHost := (sessions + hosts - 1) / hosts
	wait := time.Duration(float64(max(0, perHost-c.MaxConnsPerHost)) / c.RatePerHost * float64(time.Second))
	if lim := d.ConnRateLimit; lim > 0 {
		// Postfix's anvil: lim connections a window, whatever our rate.
		wait = max(wait, time.Duration((perHost-1)/lim)*d.ConnRateWindow)
	}
	return wait + one
}

// reachesRCPT: the domain's hosts get as far as answering RCPT.
func reachesRCPT(d *mailworld.Domain) bool {
	return !(d.NXDomain || d.NullMX || d.NoAddress || d.Tarpit || d.DropConnection)
}

func (f sessionFloor) print(w io.Writer, conc int) {
	fmt.Fprintf(w, "session floor at %d sessions at once (any engine; DNS, CPU, politeness and greylisting left out): %.2f s "+
		"= %d sessions over %d MX host groups, %.1f session-seconds (greeting delay + 3 round trips each); "+
		"one session per row: %.1f s\n",
		conc, f.floor.Seconds(), f.sessions, f.groups, f.busy.Seconds(), f.perRow.Seconds())
	fmt.Fprintf(w, "politeness floor of our engine at its default per-host limits (%d connections, %.0f new a second, %d RCPTs a session unless the host says fewer, %d rejections a session at Postfix hosts): %.2f s, at %s\n",
		f.limits.MaxConnsPerHost, f.limits.RatePerHost, f.limits.MaxRcptPerSession, f.limits.MaxRejectsPerSession, f.polite.Seconds(), f.politeHost)
}

// mailboxBehaviours answers what a world's domain does with a local part,
// indexing each domain's mailboxes by lower-cased name on first use: the
// floor and the fewest-connections count read the world the same way.
func mailboxBehaviours() func(d *mailworld.Domain, local string) mailworld.Behaviour {
	boxes := map[string]map[string]mailworld.Behaviour{}
	return func(d *mailworld.Domain, local string) mailworld.Behaviour {
		m := boxes[d.Name]
		if m == nil {
			m = make(map[string]mailworld.Behaviour, len(d.Mailboxes))
			for k, b := range d.Mailboxes {
				m[strings.ToLower(k)] = b
			}
			boxes[d.Name] = m
		}
		if b, ok := m[local]; ok {
			return b
		}
		return d.DefaultBehaviour
	}
}
