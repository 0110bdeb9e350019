package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// limitsFloor is what the world's hosts' own limits allow (issue 34's
// targets): the soonest any verifier could finish the list, and the
// fewest connections it could open, if it knew every host's limits from
// the start. Per MX host group (a provider's hosts, or a domain's own) it
// takes the greylisting delay (its greylisted addresses are asked again
// in a later session, once the delay has passed), the connection limits
// (anvil's connections a window, sessions at once), the RCPT limit a
// session, the error sleeps and hard limit (Postfix's), and the reply
// delays of a session (greeting delay, round trips, flow control), and
// plans the group's sessions with the prober's own cost model
// (smtpprobe.LimitsFloor). The world's floor is the slowest group's; the
// fewest connections are summed. Hosts that never answer (tarpits) or
// hang up at once count one connection each and no time: how long to
// wait on them is the verifier's choice, not their limit. The verifier's
// own concurrency is left out (sessionFloor has it). A host with a
// reputation delay (reputationFloor) counts the verifier's egress
// identities: each may send it a few unknown recipients for nothing.
type limitsFloor struct {
	floor      time.Duration
	host, why  string // the group that sets the floor, and its limit
	least      int    // fewest connections the hosts' limits allow
	atFloor    int    // fewest connections of plans that end by the floor
	groups     int
	greylisted int // groups with greylisted addresses
	// per group (named as the world names its hosts, mxN.<group>): its
	// fewest connections, and what it is
	perGroup map[string]groupLeast
}

type groupLeast struct {
	least, atFloor int
	what           string
	rcpts, rejects int
}

func computeLimitsFloor(doms []mailworld.Domain, rows []string, identities int) limitsFloor {
	byName := make(map[string]*mailworld.Domain, len(doms))
	for i := range doms {
		byName[doms[i].Name] = &doms[i]
	}
	type group struct {
		d *mailworld.Domain
		// The first pass asks every address once (and each domain's
		// catch-all probe): rcpts RCPTs, rejects errors of the host's
		// (a greylisted address's 451 too). The greylisted addresses and
		// probes (grey) are asked again once the delay has passed:
		// retryRejects errors among those answers.
		rcpts, rejects, grey int
		retryRejects         int
		unknowns             int // refused as unknown (550 5.1.1), what a reputation counts
		probed               map[string]bool
		dead                 bool
	}
	behaviour := mailboxBehaviours()
	groups := map[string]*group{}
	for _, row := range rows {
		addr := strings.ToLower(verify.TrimPadding(row))
		at := strings.LastIndexByte(addr, '@')
		if at < 0 {
			continue
		}
		d := byName[addr[at+1:]]
		if d == nil || d.NXDomain || d.NullMX || d.NoAddress || d.AllDown {
			continue
		}
		key := d.Provider
		if key == "" {
			key = d.Name
		}
		g := groups[key]
		if g == nil {
			g = &group{d: d, probed: map[string]bool{}, dead: d.Tarpit || d.DropConnection}
			groups[key] = g
		}
		if g.dead {
			continue
		}
		// ask counts one RCPT of the first pass (and, at a greylisting
		// domain, of the retry) for a mailbox that exists or not.
		ask := func(exists bool) {
			g.rcpts++
			switch {
			case d.PolicyReject: // refused before greylisting
				g.rejects++
			case d.Greylist > 0:
				g.grey++
				g.rejects++ // the first answer, 451, is an error for Postfix
				if !exists {
					g.retryRejects++
				}
			case !exists:
				g.rejects++
			}
			if !exists && !d.PolicyReject {
				g.unknowns++
			}
		}
		b := behaviour(d, addr[:at])
		ask(b == mailworld.Exists || b == mailworld.CatchAll)
		if !g.probed[d.Name] {
			// One address that cannot exist, for the catch-all question:
			// every verifier that answers "catch-all" asks it (at a
			// greylisting domain, after the delay too).
			g.probed[d.Name] = true
			ask(d.DefaultBehaviour == mailworld.CatchAll)
		}
	}
	f := limitsFloor{perGroup: map[string]groupLeast{}}
	// Once the floor is known: each group's fewest connections of plans
	// that end by it.
	var atFloor []func()
	for key, g := range groups {
		d := g.d
		f.groups++
		hosts := max(1, d.MXHosts)
		if d.NoMX {
			hosts = 1 // its A record
		}
		if g.dead {
			f.least += hosts
			f.atFloor += hosts
			f.perGroup[key] = groupLeast{least: hosts, atFloor: hosts, what: "silent or hangs up"}
			continue
		}
		if d.PrimaryDown {
			hosts-- // refuses connections: none counted
		}
		spread := 1
		if d.EqualPrefs {
			spread = max(1, hosts)
		}
		one := d.GreetingDelay + 3*d.Latency + d.InFlowDelay
		window := d.ConnRateWindow
		if window <= 0 && d.ConnRateLimit > 0 {
			window = time.Minute
		}
		l := smtpprobe.ServerLimits{Conns: d.MaxConns, PerWindow: d.ConnRateLimit, Window: window, RcptsPerSession: d.RcptLimit,
			SoftErrors: d.SoftErrors, HardErrors: d.HardErrors, ErrorSleep: d.ErrorSleep, Session: one}
		// The floor spreads the work over the hosts of equal preference
		// (each has its own limits); the fewest connections need not: one
		// host can take it all.
		per := func(n int) int { return (n + spread - 1) / spread }
		floor, _, _ := smtpprobe.LimitsFloor(l, per(g.rcpts), per(g.rejects))
		least := fewestSessions(l, g.rcpts, g.rejects, g.grey, g.retryRejects)
		why := "sessions"
		switch {
		case l.SoftErrors > 0 && l.PerWindow > 0:
			why = "error sleeps and connections a window"
		case l.PerWindow > 0:
			why = "connections a window"
		case l.SoftErrors > 0:
			why = "error sleeps"
		case l.RcptsPerSession > 0 || l.Conns > 0:
			why = "RCPTs a session, sessions at once"
		}
		what := why
		first := floor
		if g.grey > 0 {
			f.greylisted++
			// The retries come due the delay after the first pass's 451s:
			// the first pass (every address once, its 451s errors too) at
			// the host's pace, the delay, then a session.
			if t := first + d.Greylist + one; t > floor {
				floor, why = t, "greylisting after the first pass"
				if first <= one {
					why = "greylisting"
				}
			}
		}
		if t := reputationFloor(d, g.rcpts, g.unknowns, identities, one); t > floor {
			floor, why = t, "reputation delay"
		}
		f.least += least
		if g.grey > 0 {
			what += ", greylisting"
		}
		if d.ReputationDelay > 0 {
			what += ", reputation"
		}
		f.perGroup[key] = groupLeast{least: least, what: what, rcpts: g.rcpts + g.grey, rejects: g.rejects + g.retryRejects}
		if floor > f.floor {
			f.floor, f.host, f.why = floor, key, why
		}
		atFloor = append(atFloor, func() {
			n := fewestByFloor(l, spread, g.rcpts, g.rejects, g.grey, g.retryRejects, first, d.Greylist, one, f.floor)
			n = max(n, least)
			gl := f.perGroup[key]
			gl.atFloor = n
			f.perGroup[key] = gl
			f.atFloor += n
		})
	}
	for _, fn := range atFloor {
		fn()
	}
	return f
}

// fewestByFloor is the fewest sessions of the plans a host group's
// limits allow that end by floor (the list's): its first pass (every
// address once) and, at a greylisting group, the retries of the grey
// greylisted ones, which come due delay after the first pass's 451s.
// How the time left over (floor less the soonest first pass, the delay
// and a session) is shared between the two passes is the plan's choice:
// every split is tried, in steps of a twentieth. The work goes to one
// host of equal preference when that plan ends by the floor, else it is
// spread over all of them (spread). (The retries' sessions are not
// filled with the group's other addresses here, as fewestSessions lets
// them be: at the floor the first pass takes those.)
func fewestByFloor(l smtpprobe.ServerLimits, spread, rcpts, rejects, grey, retryRejects int, first, delay, one, floor time.Duration) int {
	pass := func(rcpts, rejects int, by time.Duration) (int, bool) {
		k, ok := smtpprobe.LimitsFewestBy(l, rcpts, rejects, by)
		if ok || spread <= 1 {
			return k, ok
		}
		per := func(n int) int { return (n + spread - 1) / spread }
		k, ok = smtpprobe.LimitsFewestBy(l, per(rcpts), per(rejects), by)
		return k * spread, ok
	}
	if grey == 0 {
		k, _ := pass(rcpts, rejects, floor)
		return k
	}
	slack := max(0, floor-first-delay-one)
	best := 0
	for i := 0; i <= 20; i++ {
		x := slack * time.Duration(i) / 20
		a, okA := pass(rcpts, rejects, first+x)
		b, okB := pass(grey, retryRejects, one+slack-x)
		if okA && okB && (best == 0 || a+b < best) {
			best = a + b
		}
	}
	if best == 0 { // none ends by the floor: the soonest plans'
		a, _ := pass(rcpts, rejects, first)
		b, _ := pass(grey, retryRejects, one)
		best = a + b
	}
	return best
}

// fewestSessions is the fewest sessions a host group's limits allow for
// a first pass of rcpts RCPTs (rejects of them errors of the host's: a
// greylisted address's 451 counts) and a second pass, after the
// greylisting delay, of the grey greylisted ones (retryRejects errors).
// A session carries at most the host's RCPTs a session and one error
// short of its hard limit (Postfix: smtpd_hard_error_limit). The
// greylisted addresses' first asks and their retries cannot share a
// session (a session is not held idle through the delay); the others
// can go in either pass's sessions. Every bound is one no verifier can
// go below, and together they can be met: the greylisted addresses'
// sessions of each pass, the rest where room is left.
func fewestSessions(l smtpprobe.ServerLimits, rcpts, rejects, grey, retryRejects int) int {
	need := func(n, per int) int {
		if per <= 0 || n <= 0 {
			return 0
		}
		return (n + per - 1) / per
	}
	perErrors := 0
	if l.SoftErrors > 0 && l.HardErrors > 1 {
		perErrors = l.HardErrors - 1
	}
	least := max(1, need(rcpts+grey, l.RcptsPerSession), need(rejects+retryRejects, perErrors))
	if grey > 0 {
		first := max(1, need(grey, l.RcptsPerSession), need(grey, perErrors)) // every first answer a 451
		retry := max(1, need(grey, l.RcptsPerSession), need(retryRejects, perErrors))
		least = max(least, first+retry)
	}
	return least
}

func (f limitsFloor) print(w io.Writer) {
	fmt.Fprintf(w, "floor of the hosts' own limits (greylisting delay, connection limits, RCPT limits, error sleeps, reply delays; any engine knowing them): %.2f s, set by %s at %s; "+
		"fewest connections those limits allow: %d, and of plans that end by that floor: %d, over %d MX host groups, %d with greylisting\n",
		f.floor.Seconds(), f.why, f.host, f.least, f.atFloor, f.groups, f.greylisted)
}

// printAgainstLimits puts each run's wall and connections beside the
// hosts' floor and fewest connections.
func printAgainstLimits(w io.Writer, runs []*runResult, f limitsFloor) {
	fmt.Fprintf(w, "\n### Against the hosts' own limits\n\n| verifier | wall | limits floor | wall / floor | connections | fewest | connections / fewest | fewest by the floor | connections / those |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range runs {
		c := r.world.Stats.Connections
		fmt.Fprintf(w, "| %s | %.1f s | %.1f s | %.2f× | %d | %d | %.2f× | %d | %.2f× |\n", r.name, r.wall, f.floor.Seconds(), r.wall/max(f.floor.Seconds(), 1e-3),
			c, f.least, float64(c)/float64(max(f.least, 1)), f.atFloor, float64(c)/float64(max(f.atFloor, 1)))
	}
}

// printExcess lists, per run, the host groups that took the most
// connections beyond their fewest, and the excess summed by what limits
// the groups.
func printExcess(w io.Writer, runs []*runResult, f limitsFloor) {
	for _, r := range runs {
		got := map[string]int{}
		for name, h := range r.world.Stats.Hosts {
			if _, ok := f.perGroup[name]; ok {
				got[name] += h.Total // an implicit MX: the domain's own A record
			} else if _, grp, ok := strings.Cut(name, "."); ok {
				got[grp] += h.Total
			}
		}
		type ex struct {
			key  string
			n    int
			g    groupLeast
			took int
		}
		var all []ex
		byWhat := map[string]int{}
		for key, g := range f.perGroup {
			if n := got[key] - g.least; n != 0 {
				all = append(all, ex{key, n, g, got[key]})
				byWhat[g.what] += n
			}
		}
		other := 0
		for key, n := range got {
			if _, ok := f.perGroup[key]; !ok {
				other += n
			}
		}
		if other > 0 {
			byWhat["hosts of no row's domain (typos, unused MX)"] = other
		}
		sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].key < all[j].key })
		fmt.Fprintf(w, "\n%s: connections beyond the fewest, by what limits the host group:", r.name)
		var whats []string
		for k := range byWhat {
			whats = append(whats, k)
		}
		sort.Strings(whats)
		for _, k := range whats {
			fmt.Fprintf(w, " %s %+d;", k, byWhat[k])
		}
		fmt.Fprintf(w, "\n")
		shown := 8
		if os.Getenv("COMPARE_EXCESS_ALL") != "" { // every group, to compare two runs
			shown = len(all)
		}
		for _, e := range all[:min(len(all), shown)] {
			fmt.Fprintf(w, "- %s: %d connections, fewest %d, by the floor %d (%s; %d RCPTs, %d refused)\n", e.key, e.took, e.g.least, e.g.atFloor, e.g.what, e.g.rcpts, e.g.rejects)
		}
	}
}

// reputationFloor is the soonest a host that slows every reply to a client
// address once it has sent after unknown recipients (Domain.ReputationDelay)
// lets rcpts recipients, unknowns of them unknown, be answered from
// identities egress addresses. A verifier that knows the host's limits
// still cannot tell which addresses are unknown: in expectation an
// identity reaches its after-th unknown (whose answer is on time, as
// karma judges a client after the reply) after after/share of them.
// The rest are answered a delay late each, in sessions of identities the
// host already slows (greeting, EHLO and MAIL a delay late too), at most
// Domain.ClientConns of each identity at once (no limit: a session an
// address). 0: the delay costs nothing.
func reputationFloor(d *mailworld.Domain, rcpts, unknowns, identities int, one time.Duration) time.Duration {
	after := max(1, d.ReputationAfter)
	if d.ReputationDelay <= 0 || unknowns <= identities*after {
		return 0
	}
	fast := int(float64(identities*after) * float64(rcpts) / float64(unknowns))
	slow := rcpts - fast
	perStream := 1
	if d.ClientConns > 0 {
		perStream = (slow + identities*d.ClientConns - 1) / (identities * d.ClientConns)
	}
	return one + time.Duration(3+perStream)*d.ReputationDelay
}
