// Package mailworld is a test kit: a small, declarative "mail world" running
// entirely on loopback. It starts an authoritative-style DNS server (UDP and
// TCP on one port) answering MX/A/AAAA/SOA for a set of domains, and SMTP
// servers for their mail exchangers, each MX host on its own 127.x.y.z
// address at one shared port. Every domain declares its DNS shape and the
// SMTP behaviour of its MX hosts; GroundTruth tells which verdict a perfect
// verifier would reach for an address, and Stats exposes what the servers
// saw (connections, concurrency, commands, DNS queries).
//
// Binding arbitrary 127.0.0.0/8 addresses works out of the box on Linux.
// Nothing ever leaves the loopback interface. With Options.Network (an
// in-memory network, internal/kits/memnet) nothing touches a socket at
// all: the world then runs in a testing/synctest bubble, where its
// greylisting windows, tarpits and rate windows pass in simulated time.
package mailworld

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Behaviour is how an MX host answers RCPT TO for a mailbox.
type Behaviour int

const (
	// Missing: 550 5.1.1 user unknown. It is the zero value, so a Domain
	// without DefaultBehaviour rejects unknown local parts.
	Missing Behaviour = iota
	// Exists: 250 2.1.5.
	Exists
	// Full: 552 5.2.2 mailbox full.
	Full
	// CatchAll: 250 2.1.5. As Domain.DefaultBehaviour it makes the domain a
	// catch-all (every local part accepted); in Mailboxes it is like Exists.
	CatchAll
	// Disabled: 550 5.2.1 mailbox disabled (ground truth "missing").
	Disabled
	// TempFail: 450 4.2.1 mailbox temporarily unavailable, on every attempt
	// (ground truth "unconfirmed").
	TempFail
)

func (b Behaviour) String() string {
	switch b {
	case Missing:
		return "missing"
	case Exists:
		return "exists"
	case Full:
		return "full"
	case CatchAll:
		return "catchall"
	case Disabled:
		return "disabled"
	case TempFail:
		return "tempfail"
	}
	return fmt.Sprintf("behaviour(%d)", int(b))
}

// Domain declares one domain of the world.
//
// DNS shape: at most one of NXDomain, NullMX, NoMX, NoAddress; none means
// MXHosts MX records. SMTP fields only matter for domains that have MX hosts
// (or, with NoMX, the implicit MX on the domain's own A record).
type Domain struct {
	Name string // ASCII domain name, e.g. "example.test"

	NXDomain  bool // NXDOMAIN for the name and everything below it
	NullMX    bool // single "MX 0 ." (RFC 7505); the domain keeps an A record whose port refuses connections
	NoMX      bool // no MX, an A record: implicit MX (RFC 5321 §5.1) served by one SMTP host
	NoAddress bool // the domain exists (SOA) but has no MX and no A/AAAA

	// MXHosts is the number of MX hosts (default 1; at least 2 with
	// PrimaryDown), named mx1.<group>, mx2.<group>... with preferences
	// 10, 20, ... each on its own loopback IP.
	MXHosts int
	// TTL of every record of the domain and the SOA MINIMUM used for
	// negative answers (default 300).
	TTL uint32
	// Provider makes domains share MX hosts, like mail hosted at a big
	// provider: all domains with the same Provider (a DNS name, e.g.
	// "bigmail.test") use the hosts mx1.<Provider>, ... Connection-level
	// settings (MXHosts, Tarpit, DropConnection, DropAtRCPT, SecondRCPT452,
	// PrimaryDown, MaxConns) must then agree within the group; recipient-level
	// ones (Mailboxes, DefaultBehaviour, Greylist, PolicyReject) stay per
	// domain. A domain without Provider forms its own group named after it.
	Provider string

	// Mailboxes maps local parts (case-insensitive) to their behaviour;
	// other local parts get DefaultBehaviour.
	Mailboxes        map[string]Behaviour
	DefaultBehaviour Behaviour // zero value Missing; CatchAll accepts everything

	// Greylist: RCPT gets 451 4.7.1 for each (sender, recipient) pair until
	// this much time has passed since the pair was first seen.
	Greylist time.Duration
	// PolicyReject: every RCPT for the domain gets 550 5.7.1 (policy).
	PolicyReject bool
	// Tarpit: MX hosts accept TCP connections but never send anything.
	Tarpit bool
	// DropConnection: MX hosts send the greeting, then close the connection
	// without a reply when the client sends EHLO/HELO.
	DropConnection bool
	// DropAtRCPT: MX hosts answer EHLO and MAIL normally, then close the
	// connection without a reply at the first RCPT.
	DropAtRCPT bool
	// SecondRCPT452: any RCPT after the first in one transaction gets
	// 452 4.5.3 too many recipients.
	SecondRCPT452 bool
	// PrimaryDown: the first MX host refuses connections (its port is
	// bound but not listening); the others work.
	PrimaryDown bool
	// AllDown: every MX host refuses connections (its port is bound but
	// not listening): no host ever answers, so the ground truth is
	// TruthTimeout (code 5), as for a tarpit.
	AllDown bool
	// MaxConns, if positive, is the number of concurrent connections an MX
	// host serves; extra connections get Postfix's anvil refusal, "421
	// 4.7.0 <host> Error: too many connections from <ip>", at the greeting
	// and are closed (smtpd_client_connection_count_limit).
	MaxConns int
	// ClientConns, if positive, is the number of concurrent connections
	// one client address may hold to an MX host (Haraka's limit plugin
	// [concurrency], which karma sets per client); extra connections get
	// the same 421 at the greeting. Other addresses are not counted.
	ClientConns int
	// ConnRateLimit, if positive, is the number of connections a client
	// IP may open in a window of ConnRateWindow (default 60s); later ones
	// get the same 421 at the greeting. As Postfix's anvil counts
	// (smtpd_client_connection_rate_limit, anvil_rate_time_unit): fixed
	// windows, a new one starting at the first connection after the last
	// ended, refused connections counted too.
	ConnRateLimit  int
	ConnRateWindow time.Duration
	// ConnRateSliding makes ConnRateLimit count over the last
	// ConnRateWindow, every attempt (refused ones too) as sendmail's
	// ratecontrol and Haraka's limit plugin count, instead of anvil's
	// fixed windows: a client that retries within the window keeps it
	// full.
	ConnRateSliding bool
	// ReputationDelay, if positive, slows every reply to a client address
	// by it once that address has sent an unknown recipient ("550 5.1.1"),
	// in any session from then on (Haraka's karma, reputation services):
	// the client's other egress addresses are not slowed.
	// ReputationAfter, when above 1, is the number of unknown recipients
	// a client address may send before it is bad (karma's score falls
	// below its threshold after a few): the reply to that one is not
	// slowed, every later one is.
	ReputationDelay time.Duration
	ReputationAfter int
	// RcptLimit, if positive, is the number of RCPTs an MX host takes in
	// one connection; later ones get "452 4.5.3 too many recipients".
	RcptLimit int
	// TxRcptLimit, if positive, is the number of RCPTs a transaction takes
	// (Postfix's smtpd_recipient_limit); later ones get "452 4.5.3 Error:
	// too many recipients", which, as in Postfix (below
	// smtpd_recipient_overshoot_limit), is not an error of the session.
	TxRcptLimit int
	// InFlowDelay holds the reply to the first accepted RCPT of every
	// transaction this long: Postfix's flow control (in_flow_delay, 1s by
	// default) when its queue is not draining, the normal state of a
	// quiet server. Postfix opens the queue file at the first accepted
	// recipient (smtpd_delay_open_until_valid_rcpt = yes) and its cleanup
	// server pauses before taking it when no flow token is left; a
	// transaction without an accepted recipient opens none.
	InFlowDelay time.Duration
	// NonmailLimit, if positive, makes the host drop a session that sends
	// more than this many non-mail commands ("554 Too many nonmail
	// commands"), counted as Exim counts them (smtp_accept_max_nonmail,
	// default 10): every command but MAIL, RCPT, DATA and QUIT, except
	// one RSET and one HELO/EHLO per message; the count starts again only
	// with the connection. Their greeting then says "ESMTP Exim 4.96".
	NonmailLimit int
	// TarpitHangup, with Tarpit, closes each connection this long after
	// it was accepted, still without a word (0: held until the client
	// gives up or IdleTimeout).
	TarpitHangup time.Duration
	// Latency, if positive, is the round trip to the domain's MX hosts
	// (Options.Latency otherwise).
	Latency time.Duration
	// EqualPrefs gives all MX hosts the same preference (10), as big
	// providers publish them to spread the load.
	EqualPrefs bool
	// GreetingDelay holds the 220 greeting of every connection this long
	// (after the round trip): the connect-time checks real servers run
	// first (reverse DNS, DNS blocklists).
	GreetingDelay time.Duration
	// ErrorLimits, when SoftErrors is positive, make the MX hosts behave as
	// Postfix's smtpd does by default (smtpd_soft_error_limit 10,
	// smtpd_hard_error_limit 20, smtpd_error_sleep_time 1s): every 4xx or
	// 5xx reply (a rejected or deferred RCPT too) counts an error for the
	// session, RSET does not reset the count; once SoftErrors are counted
	// every reply waits ErrorSleep first, and once HardErrors are counted
	// the next command gets "421 4.7.0 Error: too many errors" and the
	// connection closes. Their greeting then says "ESMTP Postfix", as
	// Postfix's default banner does.
	SoftErrors, HardErrors int
	ErrorSleep             time.Duration
	// BadRcptThrottle, when positive, makes the MX hosts sleep
	// BadRcptSleep before every reply once this many recipients of the
	// transaction were refused (4xx or 5xx other than "too many
	// recipients"): the bad-recipient throttle of anti-harvest setups. A
	// new transaction (RSET or MAIL) starts the count again. Each reply
	// it slept for is sent at once, unless WholeGroups.
	BadRcptThrottle int
	BadRcptSleep    time.Duration
	// WholeGroups makes the MX hosts answer a pipelined group only once
	// they have processed all of it: every reply of the group leaves in
	// one write, after the last one's delays (no reply is flushed before).
	WholeGroups bool
	// Banner is the greeting's text after the host name (default "ESMTP
	// mailworld", or "ESMTP Postfix" with SoftErrors, "ESMTP Exim 4.96"
	// with NonmailLimit; many administrators hide the name).
	Banner string
}

// Options configures Start.
type Options struct {
	// SMTPPort is the port every MX host listens on; 0 picks one that is
	// free on all the world's loopback IPs.
	SMTPPort int
	// DNSAddr is where the DNS server listens, UDP and TCP (default
	// "127.0.0.1:0").
	DNSAddr string
	// Latency is the round trip of every SMTP exchange: a reply (the
	// greeting included) leaves this long after its command arrived, and
	// pipelined commands, which arrive together, are answered together.
	Latency time.Duration
	// IdleTimeout closes SMTP connections idle that long (default 60s);
	// tarpitted connections are held that long too.
	IdleTimeout time.Duration
	// Now is the clock used for greylisting (default time.Now).
	Now func() time.Time
	// LoopbackBase, when 16 or more, is the second byte of the hosts'
	// 127.B.x.y addresses, so that worlds started one after another give
	// every host the same address (runs that reuse what was learnt about
	// hosts); default: one derived from the process and world, to keep
	// concurrent worlds apart.
	LoopbackBase int
	// Network, when set, is where the servers listen instead of the
	// loopback interface (e.g. a *memnet.Network, whose DialContext the
	// clients then use). A host that refuses connections just does not
	// listen there; SMTPPort 0 means 25 and DNSAddr defaults to
	// "127.0.0.53:53", as nothing else can hold the ports.
	Network Network
}

// Network is where a world's servers listen: an in-memory network for
// tests in simulated time.
type Network interface {
	Listen(network, address string) (net.Listener, error)
	ListenPacket(network, address string) (net.PacketConn, error)
}

// Ground-truth categories returned by GroundTruth.
const (
	TruthDeliverable = "deliverable" // mailbox exists
	TruthMissing     = "missing"     // 550 5.1.1 / 5.2.1 (code 400)
	TruthFull        = "full"        // 552 5.2.2 (code 410)
	TruthCatchAll    = "catchall"    // domain accepts any local part (code 45)
	TruthGreylisted  = "greylisted"  // 451 until the greylist window passed (UnderlyingTruth tells the final verdict)
	TruthNXDomain    = "nxdomain"    // code 310 (also for domains unknown to the world)
	TruthNoAddress   = "noaddress"   // code 315
	TruthNullMX      = "nullmx"      // code 325
	TruthPolicy      = "policy"      // 550 5.7.1 (code 420)
	TruthTimeout     = "timeout"     // no host ever sends a byte: tarpits, hosts refusing connections (code 5)
	TruthUnconfirmed = "unconfirmed" // domain OK, mailbox cannot be confirmed: dropped connections, 450 (code 20)
	TruthInvalid     = "invalid"     // not an address (no @, empty parts)
)

type domainState struct {
	Domain
	name      string
	mailboxes map[string]Behaviour // lower-cased keys
	group     *group
	sink      *host // NullMX: the refusing address behind the A record

	greyMu sync.Mutex
	grey   map[string]time.Time // sender "\x00" rcpt → first seen
}

type group struct {
	name    string
	hosts   []*host
	domains map[string]*domainState
	tmpl    *domainState // connection-level settings
	ttl     uint32
	implied bool // NoMX: one host named after the domain itself
}

// World is a running mail world. Close it when done.
type World struct {
	opts    Options
	domains map[string]*domainState
	order   []string // domain names as given
	groups  []*group
	hosts   []*host
	byName  map[string]*host
	port    int

	zone    map[string]*zoneNode
	nxSOA   map[string]*dns.SOA
	dnsUDP  *dns.Server
	dnsTCP  *dns.Server
	dnsAddr string
	dnsMu   sync.Mutex
	dnsQ    map[dnsKey]int
	dnsN    atomic.Int64

	statsMu   sync.Mutex
	mailFrom  map[string]int
	ehloNames map[string]int
	cur, peak atomic.Int64

	connMu sync.Mutex
	conns  map[net.Conn]struct{}

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	stopAfter func() bool
}

var worldSeq atomic.Uint32

// Start validates domains, binds the DNS server and every MX host, and
// serves until Close is called or ctx is done.
func Start(ctx context.Context, domains []Domain, opts Options) (*World, error) {
	if opts.DNSAddr == "" {
		opts.DNSAddr = "127.0.0.1:0"
		if opts.Network != nil {
			opts.DNSAddr = "127.0.0.53:53"
		}
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 60 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := checkLoopback(opts.DNSAddr); err != nil {
		return nil, err
	}
	w := &World{
		opts:      opts,
		domains:   make(map[string]*domainState, len(domains)),
		byName:    make(map[string]*host),
		dnsQ:      make(map[dnsKey]int),
		mailFrom:  make(map[string]int),
		ehloNames: make(map[string]int),
		conns:     make(map[net.Conn]struct{}),
		done:      make(chan struct{}),
	}
	if err := w.build(domains); err != nil {
		return nil, err
	}
	if err := w.bindSMTP(); err != nil {
		return nil, err
	}
	w.buildZone()
	if err := w.startDNS(); err != nil {
		w.closeHosts()
		return nil, err
	}
	for _, h := range w.hosts {
		if h.ln != nil {
			w.wg.Add(1)
			go w.acceptLoop(h)
		}
	}
	w.stopAfter = context.AfterFunc(ctx, func() { w.Close() })
	return w, nil
}

func checkLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("mailworld: bad address %q: %w", hostport, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("mailworld: %q is not a loopback address", hostport)
	}
	return nil
}

func canon(name string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
}

// build validates the declarations and lays out groups and hosts.
func (w *World) build(domains []Domain) error {
	groups := map[string]*group{}
	nxNames := map[string]bool{}
	for i := range domains {
		if err := w.addDomain(domains[i], groups, nxNames); err != nil {
			return err
		}
	}
	for _, g := range w.groups {
		if nxNames[g.name] && len(g.domains) > 0 && g.domains[g.name] == nil {
			return fmt.Errorf("mailworld: provider %q is also an NXDomain domain", g.name)
		}
	}
	return w.layoutHosts()
}

// addDomain validates one declaration, fills its defaults and puts it in
// its group (its Provider's, else its own) unless it has no MX hosts.
func (w *World) addDomain(d Domain, groups map[string]*group, nxNames map[string]bool) error {
	name := canon(d.Name)
	if !validName(name) {
		return fmt.Errorf("mailworld: invalid domain name %q", d.Name)
	}
	if _, dup := w.domains[name]; dup {
		return fmt.Errorf("mailworld: duplicate domain %q", name)
	}
	shapes := 0
	for _, b := range []bool{d.NXDomain, d.NullMX, d.NoMX, d.NoAddress} {
		if b {
			shapes++
		}
	}
	if shapes > 1 {
		return fmt.Errorf("mailworld: %s: at most one of NXDomain, NullMX, NoMX, NoAddress", name)
	}
	if d.TTL == 0 {
		d.TTL = 300
	}
	if d.MXHosts <= 0 {
		d.MXHosts = 1
	}
	if d.PrimaryDown && d.MXHosts < 2 {
		d.MXHosts = 2
	}
	if d.ConnRateLimit > 0 && d.ConnRateWindow <= 0 {
		d.ConnRateWindow = time.Minute
	}
	ds := &domainState{Domain: d, name: name, mailboxes: make(map[string]Behaviour, len(d.Mailboxes))}
	for lp, b := range d.Mailboxes {
		ds.mailboxes[strings.ToLower(lp)] = b
	}
	w.domains[name] = ds
	w.order = append(w.order, name)
	if d.NXDomain {
		nxNames[name] = true
	}
	if shapes == 1 && !d.NoMX {
		if d.Provider != "" {
			return fmt.Errorf("mailworld: %s: Provider needs a domain with MX hosts", name)
		}
		return nil
	}
	gname := name
	if d.Provider != "" {
		if d.NoMX {
			return fmt.Errorf("mailworld: %s: NoMX and Provider are exclusive", name)
		}
		gname = canon(d.Provider)
		if !validName(gname) {
			return fmt.Errorf("mailworld: %s: invalid Provider %q", name, d.Provider)
		}
	}
	g := groups[gname]
	if g == nil {
		g = &group{name: gname, domains: map[string]*domainState{}, tmpl: ds, ttl: d.TTL, implied: d.NoMX}
		groups[gname] = g
		w.groups = append(w.groups, g)
	} else if err := sameConnSettings(g.tmpl, ds); err != nil {
		return err
	}
	g.domains[name] = ds
	ds.group = g
	return nil
}

// layoutHosts gives every group its MX hosts and every null MX domain a
// down sink, each on its own loopback IP.
func (w *World) layoutHosts() error {
	// Loopback IPs: 127.B.x.y with B varying per process and world to keep
	// concurrent worlds apart (port clashes are retried anyway).
	seq := worldSeq.Add(1)
	b := 16 + (uint32(os.Getpid())*31+seq*7)%224
	if w.opts.LoopbackBase >= 16 && w.opts.LoopbackBase < 240 {
		b = uint32(w.opts.LoopbackBase)
	}
	next := 0
	nextIP := func() netip.Addr {
		i := next
		next++
		return netip.AddrFrom4([4]byte{127, byte(b + uint32(i/(250*256))), byte(i / 250 % 256), byte(i%250 + 1)})
	}
	for _, g := range w.groups {
		t := g.tmpl
		n := t.MXHosts
		if g.implied {
			n = 1
		}
		for i := 0; i < n; i++ {
			hn := fmt.Sprintf("mx%d.%s", i+1, g.name)
			if g.implied {
				hn = g.name
			}
			pref := uint16(10 * (i + 1))
			if t.EqualPrefs {
				pref = 10
			}
			h := &host{name: hn, ip: nextIP(), group: g, pref: pref, down: t.PrimaryDown && i == 0 || t.AllDown}
			g.hosts = append(g.hosts, h)
			w.hosts = append(w.hosts, h)
			w.byName[hn] = h
		}
	}
	for _, name := range w.order {
		ds := w.domains[name]
		if ds.NullMX {
			h := &host{name: name, ip: nextIP(), down: true}
			ds.sink = h
			w.hosts = append(w.hosts, h)
		}
	}
	if next > 250*256*(256-int(b)) {
		return errors.New("mailworld: too many hosts")
	}
	return nil
}

// validName accepts lower-case LDH names (underscores allowed) of at most
// 253 octets with labels of 1 to 63 octets.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func sameConnSettings(a, b *domainState) error {
	type conn struct {
		MXHosts                                                  int
		Tarpit, DropConnection, DropAtRCPT, SecondRCPT452, PDown bool
		AllDown                                                  bool
		MaxConns, RcptLimit, ConnRateLimit, TxRcptLimit          int
		NonmailLimit, ClientConns                                int
		Latency, GreetingDelay, ConnRateWindow, InFlowDelay      time.Duration
		TarpitHangup                                             time.Duration
		EqualPrefs                                               bool
		SoftErrors, HardErrors                                   int
		ErrorSleep                                               time.Duration
		Banner                                                   string
		BadRcptThrottle                                          int
		BadRcptSleep                                             time.Duration
		WholeGroups, ConnRateSliding                             bool
		ReputationDelay                                          time.Duration
		ReputationAfter                                          int
	}
	key := func(d *domainState) conn {
		return conn{d.MXHosts, d.Tarpit, d.DropConnection, d.DropAtRCPT, d.SecondRCPT452, d.PrimaryDown, d.AllDown,
			d.MaxConns, d.RcptLimit, d.ConnRateLimit, d.TxRcptLimit, d.NonmailLimit, d.ClientConns,
			d.Latency, d.GreetingDelay, d.ConnRateWindow, d.InFlowDelay, d.TarpitHangup,
			d.EqualPrefs, d.SoftErrors, d.HardErrors, d.ErrorSleep, d.Banner,
			d.BadRcptThrottle, d.BadRcptSleep, d.WholeGroups, d.ConnRateSliding, d.ReputationDelay, d.ReputationAfter}
	}
	ca, cb := key(a), key(b)
	if ca != cb {
		return fmt.Errorf("mailworld: %s and %s share provider %q but differ in connection-level settings", a.name, b.name, b.Provider)
	}
	return nil
}

// DNSAddr returns the host:port of the DNS server (UDP and TCP).
func (w *World) DNSAddr() string { return w.dnsAddr }

// SMTPPort returns the port all MX hosts listen on.
func (w *World) SMTPPort() int { return w.port }

// Domains returns the names of the world's domains, in declaration order.
func (w *World) Domains() []string { return append([]string(nil), w.order...) }

// Domain returns the declaration of a domain (nil map fields as given).
func (w *World) Domain(name string) (Domain, bool) {
	ds := w.domains[canon(name)]
	if ds == nil {
		return Domain{}, false
	}
	return ds.Domain, true
}

// MXAddrs returns "ip:port" of the SMTP hosts serving domain, in preference
// order (a PrimaryDown host first), or nil if the domain has none.
func (w *World) MXAddrs(domain string) []string {
	ds := w.domains[canon(domain)]
	if ds == nil || ds.group == nil {
		return nil
	}
	out := make([]string, len(ds.group.hosts))
	for i, h := range ds.group.hosts {
		out[i] = h.addr(w.port)
	}
	return out
}

// MXHostNames returns the MX host names of domain in preference order.
func (w *World) MXHostNames(domain string) []string {
	ds := w.domains[canon(domain)]
	if ds == nil || ds.group == nil {
		return nil
	}
	out := make([]string, len(ds.group.hosts))
	for i, h := range ds.group.hosts {
		out[i] = h.name
	}
	return out
}

// Close stops every server, closes all connections and waits for the
// goroutines to exit. It is idempotent.
func (w *World) Close() error {
	w.closeOnce.Do(func() {
		if w.stopAfter != nil {
			w.stopAfter()
		}
		close(w.done)
		var errs []error
		for _, s := range []*dns.Server{w.dnsUDP, w.dnsTCP} {
			if s != nil {
				if err := s.Shutdown(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		w.closeHosts()
		w.connMu.Lock()
		for c := range w.conns {
			c.Close()
		}
		w.connMu.Unlock()
		w.wg.Wait()
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}

func (w *World) closeHosts() {
	for _, h := range w.hosts {
		h.close()
	}
}

// split returns the lower-cased local part and domain of an address.
func split(address string) (local, domain string, ok bool) {
	address = strings.TrimSpace(address)
	at := strings.LastIndexByte(address, '@')
	if at <= 0 || at == len(address)-1 {
		return "", "", false
	}
	return strings.ToLower(address[:at]), canon(address[at+1:]), true
}

// GroundTruth returns the category a perfect verifier should report for
// address (one of the Truth* constants). Greylisted domains report
// TruthGreylisted; see UnderlyingTruth for the verdict after the window.
func (w *World) GroundTruth(address string) string {
	t, grey := w.truth(address)
	if grey {
		return TruthGreylisted
	}
	return t
}

// UnderlyingTruth is GroundTruth for a verifier that waits out greylisting:
// greylisted addresses report their mailbox verdict.
func (w *World) UnderlyingTruth(address string) string {
	t, _ := w.truth(address)
	return t
}

func (w *World) truth(address string) (string, bool) {
	local, domain, ok := split(address)
	if !ok {
		return TruthInvalid, false
	}
	ds := w.domains[domain]
	switch {
	case ds == nil, ds.NXDomain:
		return TruthNXDomain, false
	case ds.NullMX:
		return TruthNullMX, false
	case ds.NoAddress:
		return TruthNoAddress, false
	}
	t := ds.group.tmpl
	switch {
	case t.Tarpit, t.AllDown:
		// No host ever sends a byte: "no answer", however the
		// connection ends.
		return TruthTimeout, false
	case t.DropConnection, t.DropAtRCPT:
		return TruthUnconfirmed, false
	case ds.PolicyReject:
		return TruthPolicy, false
	}
	var v string
	switch b := ds.behaviour(local); b {
	case Exists, CatchAll:
		if ds.DefaultBehaviour == CatchAll {
			v = TruthCatchAll
		} else {
			v = TruthDeliverable
		}
	case Full:
		v = TruthFull
	case TempFail:
		v = TruthUnconfirmed
	default: // Missing, Disabled
		v = TruthMissing
	}
	return v, ds.Greylist > 0
}

func (ds *domainState) behaviour(local string) Behaviour {
	if b, ok := ds.mailboxes[local]; ok {
		return b
	}
	if local == "postmaster" {
		return Exists
	}
	return ds.DefaultBehaviour
}

// HostStats are the counters of one SMTP host.
type HostStats struct {
	Host          string // MX host name, e.g. "mx1.example.test"
	Addr          string // ip:port
	Down          bool   // refuses connections (PrimaryDown, AllDown, NullMX sink)
	Current       int    // open connections now
	MaxConcurrent int    // peak of Current
	MaxPerSecond  int    // most connections accepted within one second (sliding)
	Total         int    // connections accepted
	Rejected      int    // connections turned away with 421 at the greeting (MaxConns, ConnRateLimit)
	EHLO          int    // EHLO and HELO commands
	MAIL          int
	RCPT          int
	RSET          int
	DATA          int // must stay 0 for a verifier
	// Slowed counts replies held back by ErrorSleep, TooManyErrors the
	// sessions closed at HardErrors.
	Slowed, TooManyErrors int
	// Sent421 counts 421 replies (greeting refusals, too many errors);
	// FlowDelays the replies held back by InFlowDelay; NonmailDrops the
	// sessions dropped for too many non-mail commands.
	Sent421, FlowDelays, NonmailDrops int
	// Unknowns counts, at a ReputationDelay host, the unknown recipients
	// each client address sent since the world started (the reputation
	// it keeps; ResetStats keeps it too).
	Unknowns map[string]int
}

// WorldStats is a snapshot of everything the servers saw.
type WorldStats struct {
	Hosts          map[string]HostStats // by host name
	Connections    int                  // total accepted, all hosts
	Current        int                  // open now, all hosts
	PeakConcurrent int                  // world-wide peak of open connections
	MaxConcurrent  int                  // highest per-host MaxConcurrent
	MaxPerSecond   int                  // highest per-host MaxPerSecond
	Rejected       int
	EHLO           int
	MAIL           int
	RCPT           int
	RSET           int
	Slowed         int            // replies held back for a session's errors (ErrorSleep) or a bad-recipient throttle (BadRcptSleep)
	TooManyErrors  int            // sessions closed at their hosts' HardErrors
	Sent421        int            // 421 replies sent (greeting refusals, too many errors)
	FlowDelays     int            // replies held back by flow control (InFlowDelay)
	NonmailDrops   int            // sessions dropped for too many non-mail commands (NonmailLimit)
	DATA           int            // DATA commands: a verifier must never send one
	MailFrom       map[string]int // MAIL FROM reverse-paths seen ("" for <>)
	EHLONames      map[string]int // EHLO/HELO names seen
	DNSQueries     int            // all DNS questions answered
}

// Stats returns a snapshot of the counters.
func (w *World) Stats() WorldStats {
	s := WorldStats{Hosts: make(map[string]HostStats, len(w.hosts))}
	for _, h := range w.hosts {
		hs := h.snapshot(w.port)
		s.Hosts[h.name] = hs
		s.Connections += hs.Total
		s.Current += hs.Current
		s.MaxConcurrent = max(s.MaxConcurrent, hs.MaxConcurrent)
		s.MaxPerSecond = max(s.MaxPerSecond, hs.MaxPerSecond)
		s.Rejected += hs.Rejected
		s.EHLO += hs.EHLO
		s.MAIL += hs.MAIL
		s.RCPT += hs.RCPT
		s.RSET += hs.RSET
		s.Slowed += hs.Slowed
		s.TooManyErrors += hs.TooManyErrors
		s.Sent421 += hs.Sent421
		s.FlowDelays += hs.FlowDelays
		s.NonmailDrops += hs.NonmailDrops
		s.DATA += hs.DATA
	}
	s.PeakConcurrent = int(w.peak.Load())
	w.statsMu.Lock()
	s.MailFrom = make(map[string]int, len(w.mailFrom))
	for k, v := range w.mailFrom {
		s.MailFrom[k] = v
	}
	s.EHLONames = make(map[string]int, len(w.ehloNames))
	for k, v := range w.ehloNames {
		s.EHLONames[k] = v
	}
	w.statsMu.Unlock()
	s.DNSQueries = int(w.dnsN.Load())
	return s
}

// ResetStats zeroes the counters (peaks restart from the current values),
// the DNS query counts and the greylisting memory.
func (w *World) ResetStats() {
	for _, h := range w.hosts {
		h.reset()
	}
	w.peak.Store(w.cur.Load())
	w.statsMu.Lock()
	clear(w.mailFrom)
	clear(w.ehloNames)
	w.statsMu.Unlock()
	w.dnsMu.Lock()
	clear(w.dnsQ)
	w.dnsN.Store(0)
	w.dnsMu.Unlock()
	for _, ds := range w.domains {
		ds.greyMu.Lock()
		ds.grey = nil
		ds.greyMu.Unlock()
	}
}

func (w *World) noteName(m map[string]int, key string) {
	w.statsMu.Lock()
	if _, ok := m[key]; ok || len(m) < 10_000 {
		m[key]++
	}
	w.statsMu.Unlock()
}
