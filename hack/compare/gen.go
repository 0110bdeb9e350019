package main

import (
	"flag"
	"strconv"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/realmta"
)

// gen says which world and list to generate; parent and world child build
// the same one from it.
type gen struct {
	world       string // "synthetic" (internal/kits/mailworld) or "real" (internal/kits/realmta)
	anvilRate   int    // real: mx.anvil's connections a minute
	profile     string // "realistic" (mailworld.GenerateWith) or "classic" (mailworld.Generate)
	seed        int64
	domains     int
	rows        int
	greylist    time.Duration // realistic: greylisting window (0: no greylisting)
	tarpits     bool          // realistic and real: tarpit hosts (real: also one that hangs up and one that is down)
	latencyMax  time.Duration // realistic: round trips up to this (0: none)
	greetMax    time.Duration // realistic: greetings up to this late (0: at once)
	rcptLimit   int           // realistic: RCPTs per connection at limited hosts
	decorations bool          // realistic: padded rows, typos, disposable, garbage
	postfix     bool          // realistic: Postfix's default error limits at some hosts
	pushback    bool          // realistic: flow control, anvil, Exim's non-mail limit, tarpits that hang up (mailworld.RealisticPushback)
	reputation  bool          // realistic: karma's reputation delay on some hosts (mailworld.KarmaReputation)
	loopback    int           // synthetic: the hosts' 127.B.x.y byte B (0: one per world)
	sharedMX    int           // realistic: shared provider MX hosts (0: none)
	otherMTAs   bool          // real: sendmail and Haraka hosts too
}

func (g *gen) bind(fs *flag.FlagSet) {
	fs.StringVar(&g.world, "world", "synthetic", "synthetic (our own servers, internal/kits/mailworld) or real (Postfix, postgrey, Exim and NSD from Debian, internal/kits/realmta; root)")
	fs.IntVar(&g.anvilRate, "anvil-rate", 12, "real: connections a minute the anvil-limited Postfix host allows a client")
	fs.StringVar(&g.profile, "profile", "realistic", "world: realistic (greylisting on a tenth of the domains, tarpits, latency, padded rows...) or classic")
	fs.Int64Var(&g.seed, "seed", 1, "world and list seed")
	fs.IntVar(&g.domains, "domains", 1000, "domains in the world")
	fs.IntVar(&g.rows, "rows", 20000, "rows in the list")
	fs.DurationVar(&g.greylist, "greylist", time.Minute, "realistic and real: how long greylisting domains answer 451/450 (0: no greylisting, real: no postgrey; else postgrey's --delay, at least 1s)")
	fs.BoolVar(&g.tarpits, "tarpits", true, "realistic: some hosts are tarpits; real: a Postfix tarpit, a Postfix that hangs up without a byte and a host that is down (realmta.TarpitHosts)")
	fs.DurationVar(&g.latencyMax, "latency-max", 40*time.Millisecond, "realistic: SMTP round trips drawn from 5ms up to this (0: none)")
	fs.DurationVar(&g.greetMax, "greeting-max", 250*time.Millisecond, "realistic: greetings drawn from 0 to this late (connect-time checks)")
	fs.IntVar(&g.loopback, "loopback-base", 0, "synthetic: the hosts' addresses are 127.B.x.y with this B (16-239), the same in every world, so that a run can reuse what an earlier one learnt about hosts (0: a B per world)")
	fs.IntVar(&g.rcptLimit, "rcpt-limit", 20, "realistic: RCPTs a connection at hosts with a limit")
	fs.BoolVar(&g.decorations, "decorations", true, "realistic: padded rows, typos, disposable domains, garbage rows")
	fs.BoolVar(&g.postfix, "postfix", true, "realistic: Postfix's default error limits on a third of the ordinary domains and two hosting providers")
	fs.BoolVar(&g.otherMTAs, "other-mtas", false, "real: also a sendmail and a Haraka host with their anti-harvest settings (realmta.OtherHosts)")
	fs.IntVar(&g.sharedMX, "shared-mx", 0, "realistic: host every domain with MX hosts on this many shared provider MX hosts (mailworld.Profile.SharedMX; 0: none)")
	fs.BoolVar(&g.reputation, "reputation", false, "realistic: every fifth ordinary host without Postfix's error limits slows every reply to a client address by 1s once it has sent 2 unknown recipients (Haraka's karma; mailworld.KarmaReputation); with -proxies, each relay is a client address of its own")
	fs.BoolVar(&g.pushback, "pushback", false, "realistic: servers that push back: Postfix's flow control (1s) at Postfix hosts, anvil (12 connections a minute) at a quarter of the ordinary ones, Exim's non-mail limit at a fifth of the others, tarpits hanging up at 10s, 30s or never")
}

func (g gen) args() []string {
	return []string{"-world", g.world, "-anvil-rate", strconv.Itoa(g.anvilRate), "-profile", g.profile, "-seed", strconv.FormatInt(g.seed, 10),
		"-domains", strconv.Itoa(g.domains), "-rows", strconv.Itoa(g.rows),
		"-greylist", g.greylist.String(), "-tarpits=" + strconv.FormatBool(g.tarpits),
		"-latency-max", g.latencyMax.String(), "-greeting-max", g.greetMax.String(), "-rcpt-limit", strconv.Itoa(g.rcptLimit),
		"-decorations=" + strconv.FormatBool(g.decorations), "-postfix=" + strconv.FormatBool(g.postfix), "-pushback=" + strconv.FormatBool(g.pushback), "-reputation=" + strconv.FormatBool(g.reputation), "-shared-mx", strconv.Itoa(g.sharedMX), "-other-mtas=" + strconv.FormatBool(g.otherMTAs),
		"-loopback-base", strconv.Itoa(g.loopback)}
}

// real: the world is internal/kits/realmta's.
func (g gen) real() bool { return g.world == "real" }

// generateReal is realmta's world and list (decorations, latency and the
// profile do not apply: the servers are what they are).
func (g gen) generateReal() (realmta.World, []string) {
	return realmta.Generate(g.seed, g.domains, g.rows, realmta.GenOptions{AnvilRate: g.anvilRate, NoGreylist: g.greylist <= 0, Tarpits: g.tarpits, OtherMTAs: g.otherMTAs})
}

func (g gen) generate() ([]mailworld.Domain, []string) {
	if g.profile == "classic" {
		return mailworld.Generate(g.seed, g.domains, g.rows)
	}
	p := mailworld.RealisticProfile()
	p.Greylist = g.greylist
	if g.greylist <= 0 {
		p.GreylistShare = 0
	}
	if !g.tarpits {
		p.TarpitShare, p.NoTarpits = 0, true
	}
	p.Latency[1] = g.latencyMax
	if g.latencyMax < p.Latency[0] {
		p.Latency = [2]time.Duration{g.latencyMax, g.latencyMax}
	}
	p.GreetingDelay[1] = g.greetMax
	p.RcptLimit = g.rcptLimit
	if !g.postfix {
		p.PostfixShare, p.PostfixProviders = 0, nil
	}
	if g.pushback {
		p.Pushback = mailworld.RealisticPushback()
	}
	if g.reputation {
		k := mailworld.KarmaReputation()
		p.Pushback.ReputationEvery, p.Pushback.ReputationDelay, p.Pushback.ReputationAfter, p.Pushback.ReputationConns =
			k.ReputationEvery, k.ReputationDelay, k.ReputationAfter, k.ReputationConns
	}
	p.SharedMX = g.sharedMX
	if !g.decorations {
		p.Padded, p.SyntaxErrors, p.Disposable, p.Typos = 0, 0, 0, 0
	}
	return mailworld.GenerateWith(g.seed, g.domains, g.rows, p)
}
