package mailworld

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
)

// Ground-truth categories of list rows that are not the world's own
// addresses (see RowTruth).
const (
	TruthDisposable = "disposable" // a well-known disposable-address domain (code 525)
	TruthTypo       = "typo"       // a typo of a well-known provider's domain (invalid, with a correction)
)

// Profile shapes a generated world and its list: the share of each kind of
// domain and of each kind of list row. Shares of domains are fractions of
// all domains; the rest are ordinary domains and the mix Generate uses.
type Profile struct {
	// Greylist is how long greylisting domains answer 451 to a new
	// (sender, recipient) pair; GreylistShare is their share.
	Greylist      time.Duration
	GreylistShare float64
	// TarpitShare: hosts that accept connections and never speak;
	// NoTarpits removes the mix's own too. (Greylist 0 likewise removes
	// every greylisting domain.)
	TarpitShare float64
	NoTarpits   bool
	// PrimaryDownShare: domains whose first MX host refuses connections.
	PrimaryDownShare float64
	// RcptLimitShare: ordinary domains whose hosts take RcptLimit RCPTs a
	// connection, then answer 452 4.5.3.
	RcptLimitShare float64
	RcptLimit      int
	// Latency bounds the round trip to a domain's MX hosts, GreetingDelay
	// the time their greeting takes on top (connect-time checks: reverse
	// DNS, blocklists): each group draws its own, uniformly. Big freemail
	// providers greet at once.
	Latency, GreetingDelay [2]time.Duration
	// PostfixShare: ordinary domains whose hosts keep Postfix's default
	// error limits (Domain.SoftErrors...), every 1/PostfixShare-th one so
	// that the draws of the rest of the world do not change;
	// PostfixProviders: hosting providers whose hosts do.
	PostfixShare     float64
	PostfixProviders []string
	// Shares of list rows: padded with white space, not an address at all,
	// at a disposable-address domain, at a typo of a well-known provider.
	Padded, SyntaxErrors, Disposable, Typos float64
	// Pushback adds the ways real servers push back on a verifier (none
	// when zero).
	Pushback Pushback
	// SharedMX, when positive, hosts every domain with MX hosts on one of
	// SharedMX provider hosts (mx1.sharedNN.test, dealt out in turn), as
	// providers host thousands of domains on a few MX hosts (issue 34):
	// the hosts are ordinary (no tarpit, connection limit or error
	// limit); domain-level behaviours (greylisting, catch-all, policy
	// rejections, mailboxes) stay.
	SharedMX int
}

// Pushback is how real servers push back on a client, as a profile adds
// them to a generated world's hosts, by stride (every n-th of a kind) so
// that nothing else of the world changes.
type Pushback struct {
	// FlowDelay is Postfix's in_flow_delay (Domain.InFlowDelay) on every
	// host with its error limits, but those taking one RCPT a
	// transaction (an odd Postfix).
	FlowDelay time.Duration
	// Every AnvilEvery-th ordinary domain with Postfix's error limits lets
	// a client open AnvilLimit connections a minute (Domain.ConnRateLimit:
	// anvil's 421 at the greeting beyond).
	AnvilEvery, AnvilLimit int
	// Every EximEvery-th ordinary domain without them runs Exim's default
	// limit of 10 non-mail commands (Domain.NonmailLimit, Exim banner).
	EximEvery int
	// TarpitHangups: tarpits hang up after these times in turn, without a
	// word (Domain.TarpitHangup; 0: they hold on).
	TarpitHangups []time.Duration
	// Every ReputationEvery-th ordinary domain without Postfix's error
	// limits (and without Exim's non-mail limit) slows every reply by
	// ReputationDelay to a client address that has sent it
	// ReputationAfter unknown recipients (Domain.ReputationDelay: Haraka's
	// karma, reputation services), and serves a client address
	// ReputationConns connections at once (Domain.ClientConns); 0: none.
	ReputationEvery int
	ReputationDelay time.Duration
	ReputationAfter int
	ReputationConns int
}

// KarmaReputation is Haraka's karma as the project's real Haraka host
// runs it (1 s before every reply once a client's score falls, after 2
// unknown recipients; 2 connections at once, what karma's
// [concurrency_history] gives a client it cannot judge yet), on every
// fifth ordinary domain without Postfix's error limits. (Karma gives a
// client it knows as bad 1: not modelled.)
func KarmaReputation() Pushback {
	return Pushback{ReputationEvery: 5, ReputationDelay: time.Second, ReputationAfter: 2, ReputationConns: 2}
}

// RealisticPushback is Postfix's default flow control on every Postfix
// host, anvil at 12 connections a minute on a quarter of the ordinary
// Postfix domains, Exim's defaults on a fifth of the other ordinary
// domains, and tarpits that hang up after 10s, at 30s (a verifier's usual
// greeting timeout) or never.
func RealisticPushback() Pushback {
	return Pushback{FlowDelay: time.Second, AnvilEvery: 4, AnvilLimit: 12, EximEvery: 5,
		TarpitHangups: []time.Duration{10 * time.Second, 30 * time.Second, 0}}
}

// apply gives doms the pushback.
func (pb Pushback) apply(doms []Domain) {
	var postfix, other, pits int
	for i := range doms {
		d := &doms[i]
		if d.Tarpit && len(pb.TarpitHangups) > 0 {
			d.TarpitHangup = pb.TarpitHangups[pits%len(pb.TarpitHangups)]
			pits++
		}
		if d.SoftErrors > 0 && !d.SecondRCPT452 {
			d.InFlowDelay = pb.FlowDelay
		}
		if d.Provider != "" || strings.HasPrefix(d.Name, "freemail") || d.NXDomain || d.NullMX || d.NoAddress || d.Tarpit {
			continue
		}
		switch {
		case d.SoftErrors > 0:
			if postfix++; pb.AnvilEvery > 0 && postfix%pb.AnvilEvery == 0 {
				d.ConnRateLimit, d.ConnRateWindow = pb.AnvilLimit, time.Minute
			}
		case !d.DropConnection && !d.DropAtRCPT:
			other++
			switch {
			case pb.EximEvery > 0 && other%pb.EximEvery == 0:
				d.NonmailLimit = eximNonmailLimit
			case pb.ReputationEvery > 0 && other%pb.ReputationEvery == 1%pb.ReputationEvery:
				d.ReputationDelay, d.ReputationAfter, d.ClientConns = pb.ReputationDelay, pb.ReputationAfter, pb.ReputationConns
			}
		}
	}
}

// eximNonmailLimit is Exim's smtp_accept_max_nonmail default.
const eximNonmailLimit = 10

// RealisticProfile is a world as a verifier meets it: about a tenth of the
// domains greylisting for a minute, a few tarpits, primary MX hosts down,
// servers with a limit of RCPTs per connection, Postfix's default error
// limits on about a third of the ordinary domains and at two hosting
// providers, round trips of 5 to 40 ms, greetings up to 250 ms late, and
// lists exported from CRMs (padded rows, typos, disposable addresses,
// garbage).
func RealisticProfile() Profile {
	return Profile{
		Greylist: time.Minute, GreylistShare: 0.08, // with the mix's own: about 10.5 %
		TarpitShare: 0.005, PrimaryDownShare: 0.02,
		RcptLimitShare: 0.05, RcptLimit: 20,
		Latency:       [2]time.Duration{5 * time.Millisecond, 40 * time.Millisecond},
		GreetingDelay: [2]time.Duration{0, 250 * time.Millisecond},
		PostfixShare:  0.3, PostfixProviders: []string{"hosting-one.test", "smallbiz-mail.test"},
		Padded: 0.03, SyntaxErrors: 0.01, Disposable: 0.01, Typos: 0.01,
	}
}

// Disposable and typo domains the generator uses; both verifiers under
// comparison know them without DNS (they are not in the world).
var (
	genDisposable = []string{"mailinator.com", "yopmail.com", "guerrillamail.com", "10minutemail.com", "trashmail.com"}
	genTypos      = []string{"gmial.com", "gmal.com", "hotmial.com", "yaho.com", "outlok.com", "gmail.con"}
	genPads       = []string{" ", "  ", "\t", "\u00a0", " \u00a0", "\u3000"}
)

// GenerateWith builds a world of n domains and a list of rows over it,
// deterministically from seed, shaped by p. Like Generate, the first few
// domains are big "freemail" providers (here: MX hosts of equal
// preference, the biggest with a limit of RCPTs per connection) and rows
// follow a Zipf-like law over domains; then rows are decorated (padding,
// syntax errors, disposable and typo domains). RowTruth tells each row's
// ground truth.
func GenerateWith(seed int64, n, rows int, p Profile) ([]Domain, []string) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x6a09e667f3bcc908))
	doms := make([]Domain, n)
	free := max(1, min(5, n/100))
	for i := range doms {
		d := &doms[i]
		d.TTL = genTTLs[rng.IntN(len(genTTLs))]
		if i < free {
			d.Name = fmt.Sprintf("freemail%d.test", i+1)
			d.MXHosts, d.EqualPrefs = 3, true
			if i == 0 {
				d.RcptLimit = 50
			}
		} else {
			d.Name = fmt.Sprintf("%s-%s-%d.test", genWords[rng.IntN(len(genWords))], genWords[rng.IntN(len(genWords))], i)
			p.shape(d, rng)
		}
	}
	providerLatency(doms, p, rng)
	p.postfix(doms)
	p.Pushback.apply(doms)
	shareHosts(doms, p.SharedMX)
	addrs := genRows(rng, doms, rows, false)
	for i, a := range addrs {
		addrs[i] = p.decorate(rng, a)
	}
	return doms, addrs
}

// Postfix's defaults: smtpd_soft_error_limit, smtpd_hard_error_limit,
// smtpd_error_sleep_time.
const (
	postfixSoftErrors = 10
	postfixHardErrors = 20
	postfixErrorSleep = time.Second
)

// postfix gives Postfix's default error limits to the profile's providers
// and to every 1/PostfixShare-th ordinary domain that has working hosts.
func (p Profile) postfix(doms []Domain) {
	stride := 0
	if p.PostfixShare > 0 {
		stride = max(1, int(math.Round(1/p.PostfixShare)))
	}
	n := 0
	for i := range doms {
		d := &doms[i]
		switch {
		case slices.Contains(p.PostfixProviders, d.Provider) && d.Provider != "":
		case d.Provider != "" || strings.HasPrefix(d.Name, "freemail") || d.NXDomain || d.NullMX || d.NoAddress || d.Tarpit || stride == 0:
			continue
		default:
			if n++; n%stride != 0 {
				continue
			}
		}
		d.SoftErrors, d.HardErrors, d.ErrorSleep = postfixSoftErrors, postfixHardErrors, postfixErrorSleep
	}
}

// shape gives an ordinary domain its kind: first the profile's shares,
// then Generate's mix.
func (p Profile) shape(d *Domain, rng *rand.Rand) {
	x := rng.Float64()
	for _, k := range []struct {
		share float64
		apply func()
	}{
		{p.GreylistShare, func() { d.Greylist = p.Greylist; d.MXHosts = 1 + rng.IntN(2) }},
		{p.TarpitShare, func() { d.Tarpit = true }},
		{p.PrimaryDownShare, func() { d.PrimaryDown, d.MXHosts = true, 2 }},
		{p.RcptLimitShare, func() { d.RcptLimit = p.RcptLimit }},
	} {
		if x < k.share {
			k.apply()
			return
		}
		x -= k.share
	}
	var total float64
	for _, k := range genKinds {
		total += k.weight
	}
	y := rng.Float64() * total
	for _, k := range genKinds {
		if y < k.weight {
			k.apply(d, rng)
			break
		}
		y -= k.weight
	}
	if d.Greylist > 0 {
		d.Greylist = p.Greylist // the mix's own greylisting domains too (0: none)
	}
	if p.NoTarpits {
		d.Tarpit = false
	}
}

// providerLatency draws a round trip and a greeting delay per host group
// (domains sharing a provider share them).
func providerLatency(doms []Domain, p Profile, rng *rand.Rand) {
	draw := func(r [2]time.Duration) time.Duration {
		if r[1] <= r[0] {
			return r[0]
		}
		return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
	}
	type timing struct{ rtt, greet time.Duration }
	byProvider := map[string]timing{}
	for i := range doms {
		d := &doms[i]
		if d.NXDomain || d.NullMX || d.NoAddress {
			continue
		}
		if tm, ok := byProvider[d.Provider]; ok && d.Provider != "" {
			d.Latency, d.GreetingDelay = tm.rtt, tm.greet
			continue
		}
		d.Latency = draw(p.Latency)
		if !strings.HasPrefix(d.Name, "freemail") {
			d.GreetingDelay = draw(p.GreetingDelay)
		}
		if d.Provider != "" {
			byProvider[d.Provider] = timing{d.Latency, d.GreetingDelay}
		}
	}
}

// genRows draws addresses over doms (Zipf-like over domain rank; mailbox
// mix), registers their mailboxes, and with capitalise writes about one
// local part in 50 with a capital first letter.
func genRows(rng *rand.Rand, doms []Domain, rows int, capitalise bool) []string {
	n := len(doms)
	cum := make([]float64, n)
	var acc float64
	for i := range cum {
		acc += 1 / math.Pow(float64(i+1), 0.9)
		cum[i] = acc
	}
	addrs := make([]string, 0, rows)
	for r := 0; r < rows && n > 0; r++ {
		k := min(sort.SearchFloat64s(cum, rng.Float64()*acc), n-1)
		d := &doms[k]
		local := genLocal(rng)
		if smtp := !d.NXDomain && !d.NullMX && !d.NoAddress; smtp {
			if _, known := d.Mailboxes[local]; !known {
				var b Behaviour
				switch x := rng.IntN(100); {
				case x < 72:
					b = Exists
				case x < 94:
					b = Missing
				case x < 98:
					b = Full
				default:
					b = Disabled
				}
				if b != Missing {
					if d.Mailboxes == nil {
						d.Mailboxes = make(map[string]Behaviour)
					}
					d.Mailboxes[local] = b
				}
			}
		}
		if capitalise && rng.IntN(50) == 0 {
			local = strings.ToUpper(local[:1]) + local[1:]
		}
		addrs = append(addrs, local+"@"+d.Name)
	}
	return addrs
}

// decorate turns a row into what CRM exports contain, per the profile.
func (p Profile) decorate(rng *rand.Rand, a string) string {
	local := a[:strings.IndexByte(a, '@')]
	x := rng.Float64()
	switch {
	case x < p.SyntaxErrors:
		switch rng.IntN(5) {
		case 0:
			return strings.Replace(a, "@", "@@", 1)
		case 1:
			return strings.Replace(a, "@", " ", 1)
		case 2:
			return local + "@"
		case 3:
			return strings.Replace(a, "@", ".@", 1)
		default:
			return local[:1] + " " + a[1:]
		}
	case x < p.SyntaxErrors+p.Disposable:
		return local + "@" + genDisposable[rng.IntN(len(genDisposable))]
	case x < p.SyntaxErrors+p.Disposable+p.Typos:
		return local + "@" + genTypos[rng.IntN(len(genTypos))]
	case x < p.SyntaxErrors+p.Disposable+p.Typos+p.Padded:
		pad := genPads[rng.IntN(len(genPads))]
		switch rng.IntN(3) {
		case 0:
			return pad + a
		case 1:
			return a + pad
		}
		return pad + a + pad
	}
	return a
}

// RowTruth is the ground truth of a list row: padding is trimmed (the
// trimmed address's truth), rows that are not addresses are TruthInvalid,
// the generator's disposable and typo domains TruthDisposable and
// TruthTypo; underlying is as UnderlyingTruth (greylisting waited out).
func (w *World) RowTruth(row string) (truth, underlying string) {
	a := strings.TrimFunc(row, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' || r == '\u200B' })
	local, domain, ok := split(a)
	switch {
	case !ok || strings.ContainsFunc(a, unicode.IsSpace) || strings.Count(a, "@") != 1 ||
		strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, ".."):
		return TruthInvalid, TruthInvalid
	case contains(genDisposable, domain):
		return TruthDisposable, TruthDisposable
	case contains(genTypos, domain):
		return TruthTypo, TruthTypo
	}
	return w.GroundTruth(a), w.UnderlyingTruth(a)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// shareHosts puts the domains with MX hosts on n shared provider hosts
// (Profile.SharedMX), with the connection-level settings every domain of
// a provider must agree on: plain hosts, the first member's timing.
func shareHosts(doms []Domain, n int) {
	if n <= 0 {
		return
	}
	type timing struct{ rtt, greet time.Duration }
	first := map[string]timing{}
	k := 0
	for i := range doms {
		d := &doms[i]
		if d.NXDomain || d.NullMX || d.NoAddress || d.NoMX {
			continue
		}
		d.Provider = fmt.Sprintf("shared%02d.test", k%n)
		k++
		d.MXHosts, d.EqualPrefs = 1, false
		d.Tarpit, d.DropConnection, d.DropAtRCPT, d.SecondRCPT452, d.PrimaryDown, d.AllDown = false, false, false, false, false, false
		d.MaxConns, d.RcptLimit, d.ConnRateLimit, d.TxRcptLimit, d.NonmailLimit = 0, 0, 0, 0, 0
		d.ConnRateWindow, d.InFlowDelay, d.TarpitHangup, d.ErrorSleep, d.BadRcptSleep = 0, 0, 0, 0, 0
		d.SoftErrors, d.HardErrors, d.BadRcptThrottle, d.Banner, d.WholeGroups = 0, 0, 0, "", false
		if tm, ok := first[d.Provider]; ok {
			d.Latency, d.GreetingDelay = tm.rtt, tm.greet
		} else {
			first[d.Provider] = timing{d.Latency, d.GreetingDelay}
		}
	}
}
