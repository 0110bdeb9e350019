package realmta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// StandardHosts are the MX hosts of a generated world: one of each
// behaviour the kit offers.
//
//   - mx1.plain, mx2.plain: Postfix with its defaults (error limits 10/20
//     with 1s sleeps, 100 junk commands, in_flow_delay 1s,
//     smtpd_recipient_limit 1000, 50 connections at once per client).
//   - mx.grey: postgrey greylisting after the mailbox check.
//   - mx.anvil: anvil's connection rate limit, anvilRate connections per
//     anvil_rate_time_unit (60s): a verifier that opens sessions freely
//     meets "421 4.7.0 ... too many connections" part way through a list.
//   - mx.single: one connection at a time per client.
//   - mx.screen: postscreen with its pregreet test (6s greeting wait for a
//     new client).
//   - mx.few: smtpd_recipient_limit 10 (452 4.5.3 past it).
//   - mx.exim: Exim 4 with its defaults (smtp_accept_max_nonmail 10...).
func StandardHosts(anvilRate int) []Host {
	return []Host{
		{Name: "mx1.plain.hosts.test", Software: Postfix},
		{Name: "mx2.plain.hosts.test", Software: Postfix},
		{Name: "mx.grey.hosts.test", Software: Postfix, Greylist: true},
		{Name: "mx.anvil.hosts.test", Software: Postfix, ConnRateLimit: anvilRate},
		{Name: "mx.single.hosts.test", Software: Postfix, ConnCountLimit: 1},
		{Name: "mx.screen.hosts.test", Software: Postfix, Postscreen: true},
		{Name: "mx.few.hosts.test", Software: Postfix, RecipientLimit: 10},
		{Name: "mx.exim.hosts.test", Software: Exim},
	}
}

// TarpitHosts are the hosts that never send a byte, which Generate adds
// with GenOptions.Tarpits:
//
//   - mx.tarpit: Postfix that says nothing for 5 minutes after accepting
//     a connection (Host.Tarpit), longer than any verifier's greeting
//     timeout;
//   - mx.hangup: Postfix that closes the connection after 7s without a
//     byte (Host.HangUp);
//   - mx.down: nothing listens (Down): connections are refused.
func TarpitHosts() []Host {
	return []Host{
		{Name: "mx.tarpit.hosts.test", Software: Postfix, Tarpit: 5 * time.Minute},
		{Name: "mx.hangup.hosts.test", Software: Postfix, HangUp: 7 * time.Second},
		{Name: "mx.down.hosts.test", Software: Down},
	}
}

// OtherHosts are the sendmail and Haraka hosts Generate adds with
// GenOptions.OtherMTAs, each with the anti-harvest settings its
// documentation recommends (issue 34, item 5):
//
//   - mx.sendmail: sendmail with MaxRecipientsPerMessage 25,
//     BadRcptThrottle 3 (a second before each RCPT reply once a
//     transaction had 3 refused, 452s included), ClientRate 12 a minute
//     and ClientConn 3 at once;
//   - mx.haraka: Haraka with karma (its tarpit, at most 1s a reply once a
//     client sent an unknown recipient) and limit: 2 connections at once,
//     100 recipients and 10 errors a connection.
func OtherHosts() []Host {
	return []Host{
		{Name: "mx.sendmail.hosts.test", Software: Sendmail, RecipientLimit: 25, BadRcptThrottle: 3,
			ConnRateLimit: 12, ConnRateWindow: time.Minute, ConnCountLimit: 3},
		{Name: "mx.haraka.hosts.test", Software: Haraka, Karma: true, ConnCountLimit: 2, RecipientLimit: 100, ErrorLimit: 10},
	}
}

// otherKinds are the domains on OtherHosts (GenOptions.OtherMTAs).
var otherKinds = []struct {
	weight int
	host   string
	shape  DNSShape
	flavor string
}{
	{5, "mx.sendmail", ShapeMX, ""},
	{1, "mx.sendmail", ShapeMX, "catchall"},
	{5, "mx.haraka", ShapeMX, ""},
	{1, "mx.haraka", ShapeMX, "catchall"},
}

// GenOptions shape Generate's world.
type GenOptions struct {
	// AnvilRate is mx.anvil's smtpd_client_connection_rate_limit (default
	// 12 a minute).
	AnvilRate int
	// NoGreylist: mx.grey does not greylist (a plain Postfix host; its
	// domains and rows are drawn as before).
	NoGreylist bool
	// Tarpits adds TarpitHosts and about 3% of domains on them (the world
	// and list are then drawn differently from one without).
	Tarpits bool
	// OtherMTAs adds OtherHosts (sendmail and Haraka) and about 11% of
	// domains on them (the world and list are then drawn differently).
	OtherMTAs bool
}

// domainKinds is how Generate spreads domains, in weights out of 100.
var domainKinds = []struct {
	weight int
	host   string // "" for the DNS-only shapes
	shape  DNSShape
	flavor string // "", "catchall", "policy"
}{
	{30, "plain", ShapeMX, ""},
	{8, "plain", ShapeMX, "catchall"},
	{2, "plain", ShapeMX, "policy"},
	{4, "plain", ShapeAOnly, ""},
	{10, "mx.grey", ShapeMX, ""},
	{10, "mx.anvil", ShapeMX, ""},
	{4, "mx.single", ShapeMX, ""},
	{7, "mx.screen", ShapeMX, ""},
	{5, "mx.few", ShapeMX, ""},
	{6, "mx.exim", ShapeMX, ""},
	{2, "mx.exim", ShapeMX, "catchall"},
	{5, "", ShapeNXDomain, ""},
	{4, "", ShapeNullMX, ""},
	{3, "", ShapeNoAddress, ""},
}

// tarpitKinds are the domains on TarpitHosts (GenOptions.Tarpits).
var tarpitKinds = []struct {
	weight int
	host   string
	shape  DNSShape
	flavor string
}{
	{1, "mx.tarpit", ShapeMX, ""},
	{1, "mx.hangup", ShapeMX, ""},
	{1, "mx.down", ShapeMX, ""},
}

var (
	genFirst = []string{"anna", "ben", "chloe", "david", "emma", "felix", "grace", "hugo", "iris", "jack", "kate", "liam",
		"mia", "noah", "olivia", "paul", "quinn", "ruth", "sam", "tara", "uma", "victor", "wendy", "xavier", "yara", "zoe"}
	genLast = []string{"adams", "brown", "clark", "davis", "evans", "fisher", "garcia", "hill", "ito", "jones", "king",
		"lopez", "moore", "nguyen", "owens", "patel", "quinn", "reyes", "smith", "turner", "upton", "vance", "walsh", "young"}
	genWords = []string{"acme", "globex", "initech", "umbrella", "hooli", "vandelay", "wayne", "stark", "tyrell", "cyberdyne",
		"soylent", "wonka", "gringotts", "oscorp", "monarch", "aperture", "nakatomi", "dunder", "pied", "prestige"}
)

// Generate returns a world of n domains over StandardHosts, and a list of
// rows addresses (distinct, shuffled) whose truth the world knows: about
// 60% existing mailboxes, 35% missing ones and some full ones on the
// mail-accepting domains, any local part on catch-all and policy domains
// and on the domains without mail. The same seed gives the same world and
// list.
func Generate(seed int64, n, rows int, o GenOptions) (World, []string) {
	if o.AnvilRate <= 0 {
		o.AnvilRate = 12
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7265616c6d7461))
	w := World{Hosts: StandardHosts(o.AnvilRate)}
	if o.NoGreylist {
		for i := range w.Hosts {
			w.Hosts[i].Greylist = false
		}
	}
	kinds := domainKinds
	if o.Tarpits {
		w.Hosts = append(w.Hosts, TarpitHosts()...)
		kinds = append(slices.Clone(domainKinds), tarpitKinds...)
	}
	if o.OtherMTAs {
		w.Hosts = append(w.Hosts, OtherHosts()...)
		kinds = append(slices.Clone(kinds), otherKinds...)
	}
	host := func(tag string) string {
		if tag == "plain" {
			return fmt.Sprintf("mx%d.plain.hosts.test", 1+rng.IntN(2))
		}
		return tag + ".hosts.test"
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	for i := 0; i < n; i++ {
		x := rng.IntN(total)
		k := kinds[0]
		for _, c := range kinds {
			if x < c.weight {
				k = c
				break
			}
			x -= c.weight
		}
		d := Domain{Name: fmt.Sprintf("%s-%d.test", genWords[rng.IntN(len(genWords))], i), Shape: k.shape}
		if k.host != "" {
			d.Host = host(k.host)
			d.CatchAll = k.flavor == "catchall"
			d.Policy = k.flavor == "policy"
			boxes := map[string]bool{}
			for len(boxes) < 4+rng.IntN(37) {
				boxes[localPart(rng)] = true
			}
			for b := range boxes {
				d.Mailboxes = append(d.Mailboxes, b)
			}
			sort.Strings(d.Mailboxes)
			rng.Shuffle(len(d.Mailboxes), func(i, j int) { d.Mailboxes[i], d.Mailboxes[j] = d.Mailboxes[j], d.Mailboxes[i] })
			if full := k.host != "mx.exim" && k.host != "mx.sendmail" && k.host != "mx.haraka"; full && !d.Policy && rng.IntN(3) == 0 {
				d.Full, d.Mailboxes = d.Mailboxes[:1], d.Mailboxes[1:]
			}
		}
		w.Domains = append(w.Domains, d)
	}
	seen := map[string]bool{}
	var list []string
	for tries := 0; len(list) < rows && tries < rows*20; tries++ {
		d := w.Domains[rng.IntN(len(w.Domains))]
		var local string
		x := rng.IntN(100)
		switch {
		case len(d.Full) > 0 && x < 10:
			local = d.Full[rng.IntN(len(d.Full))]
		case len(d.Mailboxes) > 0 && x < 65:
			local = d.Mailboxes[rng.IntN(len(d.Mailboxes))]
		default:
			local = localPart(rng)
		}
		a := local + "@" + d.Name
		if !seen[a] {
			seen[a] = true
			list = append(list, a)
		}
	}
	return w, list
}

func localPart(rng *rand.Rand) string {
	f, l := genFirst[rng.IntN(len(genFirst))], genLast[rng.IntN(len(genLast))]
	switch rng.IntN(4) {
	case 0:
		return f
	case 1:
		return f[:1] + l
	}
	return f + "." + l
}
