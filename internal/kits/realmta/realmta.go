// Package realmta is a test kit, like internal/kits/mailworld, but built from
// real mail software instead of servers we wrote: Postfix (with postscreen
// and anvil), postgrey, Exim 4 and sendmail from Debian, Haraka from npm
// (with its karma and limit plugins and a redis-server), and NSD serving
// the world's zone. Start writes their configurations into a temporary directory,
// starts private instances on 127.0.0.0/8 (nothing else: no system service
// is touched, nothing is relayed or delivered) and Close stops them and
// removes their queues.
//
// A World declares MX hosts (each a listener on its own 127.x address at
// one shared port, with its own behaviour: plain virtual-mailbox Postfix
// with Postfix's defaults, postgrey greylisting, anvil connection limits,
// postscreen, a low smtpd_recipient_limit, a Postfix tarpit that says
// nothing for a while before greeting, one that hangs up without a byte,
// Exim with its defaults, sendmail and Haraka with the anti-harvest limits
// their documentation gives (sendmail.go, haraka.go), a host that is down)
// and
// domains (the DNS shape, which host serves them, their mailboxes). The
// ground truth of an address (Truth) follows from that configuration; what
// the servers saw comes from their own logs (Counts): sessions, RCPTs,
// anvil's 421s, "too many errors", postscreen's verdicts, Exim's "too many
// nonmail commands", postgrey's decisions (HostSettled reads one host's
// once its sessions are over).
//
// The software is installed by hack/install-mail-servers.sh (Ensure runs
// it); running it needs root, as Postfix's master does. Tests use Require,
// which fails under CI=true, and skips loudly elsewhere, when the software
// cannot be had.
//
// An engine test looks like this:
//
//	r := realmta.StartT(t, world, realmta.Options{GreylistDelay: 3 * time.Second})
//	// point the engine at r.DNSAddr() (--dns-server) and r.SMTPPort()
//	// (--smtp-port), with 127.0.0.0/8 allowed; verify; then compare each
//	// answer with r.Truth(address) and look at what the servers saw:
//	c, _ := r.SettledCounts(5 * time.Second)
//	// c.Hosts["mx.anvil.hosts.test"].AnvilRefused, c.Total.Sessions, ...
//
// Generate and StandardHosts give a ready world with one host of each
// behaviour and a list with known truth (hack/compare -world real uses
// them).
//
// All Postfix hosts are listeners of one Postfix instance (master.cf
// entries "127.x.y.z:port inet ... smtpd -o ..."), so they share what a
// Postfix instance shares: the queue, and with it in_flow_delay's token pool
// (default_process_limit tokens; each queue file a transaction opens takes
// one, and a quiet queue manager gives none back), while anvil's counters
// and every smtpd_* setting are per listener. Every listener accepts every
// Postfix-served domain; verifiers that follow DNS cannot tell.
package realmta

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Software is the MTA behind a host.
type Software string

const (
	Postfix Software = "postfix"
	Exim    Software = "exim"
	// Sendmail: a sendmail daemon of its own per host (sendmail.go), with
	// the anti-harvest settings of sendmail's cf/README the host asks for
	// (RecipientLimit, BadRcptThrottle, ConnRateLimit, ConnCountLimit).
	Sendmail Software = "sendmail"
	// Haraka: a Haraka daemon of its own per host (haraka.go), with the
	// karma and limit plugins the host asks for.
	Haraka Software = "haraka"
	// Down: the host's name has an A record, but nothing listens at its
	// address: every connection is refused (RST), as at a host that is
	// down or has no mail service. It never sends a byte.
	Down Software = "down"
)

// Host is one MX host: a DNS name and an SMTP listener on its own loopback
// address. Zero-valued limits keep the software's defaults.
type Host struct {
	Name     string // DNS name, e.g. "mx1.plain.test"
	Software Software

	// Postfix (and where noted sendmail and Haraka).
	Greylist bool // check_policy_service to postgrey after the mailbox check
	// Postscreen puts postscreen(8) in front of smtpd with its pregreet
	// test enforced: a new client waits postscreen_greet_wait for the
	// greeting (a "220-" line first, then the 220), and a client that
	// speaks before it is rejected.
	Postscreen bool
	// ConnRateLimit is smtpd_client_connection_rate_limit (connections a
	// client may open per anvil_rate_time_unit), ConnCountLimit
	// smtpd_client_connection_count_limit (at once; Postfix's default is
	// 50). Past either, the greeting is "421 4.7.0 <host> Error: too many
	// connections from <ip>". Sendmail: the access map's ClientRate (per
	// confCONNECTION_RATE_WINDOW_SIZE, Options.AnvilRateTimeUnit) and
	// ClientConn ("421 4.3.2 Connection rate limit exceeded." / "Too many
	// open connections."). Haraka: the limit plugin's [rate_conn] (per
	// Options.AnvilRateTimeUnit) and [concurrency] max.
	ConnRateLimit, ConnCountLimit int
	// ConnRateWindow (sendmail and Haraka) is this host's window for
	// ConnRateLimit instead of Options.AnvilRateTimeUnit, which is anvil's
	// (Postfix's) as well. sendmail's must be a multiple of 6s: its
	// ratecontrol counts connections in 6 slots of window/6 whole seconds,
	// so a 7s window is 6s and one under 6s never forgets a connection
	// (measured with sendmail 8.17.1.9: at 3s a client refused once was
	// still refused 12s later).
	ConnRateWindow time.Duration
	// RecipientLimit is smtpd_recipient_limit (RCPTs a transaction; past
	// it "452 4.5.3 Error: too many recipients"; Postfix's default 1000);
	// sendmail's confMAX_RCPTS_PER_MESSAGE ("452 4.5.3 Too many
	// recipients"); Haraka's limit [recipients] max (RCPTs a connection,
	// past it a temporary failure).
	RecipientLimit int
	// BadRcptThrottle (sendmail only) is confBAD_RCPT_THROTTLE: once a
	// transaction has had this many recipients refused, every further RCPT
	// reply of the transaction comes a second late (RSET or MAIL starts
	// the count again).
	BadRcptThrottle int
	// Karma (Haraka only) runs the karma plugin (reputation scoring) with
	// its tarpit: once a client's score is negative (refused recipients
	// are penalised), every reply is delayed by -score seconds, at most
	// KarmaTarpitMax (default 1s here; karma's own default 5s; fractions
	// of a second are allowed). An accepted RCPT waits twice (karma's rcpt
	// and rcpt_ok hooks both tarpit), a refused one and MAIL once, RSET
	// not at all.
	Karma          bool
	KarmaTarpitMax time.Duration
	// ErrorLimit (Haraka only) is the limit plugin's [errors] max: a
	// connection with more errors is disconnected.
	ErrorLimit int
	// Postfix holds more smtpd parameters for this listener (master.cf -o
	// name=value; values must not contain white space or commas).
	Postfix map[string]string

	// Tarpit (Postfix only): smtpd accepts the connection and says nothing
	// for this long (whole seconds), then greets: the "sleep" restriction
	// in smtpd_client_restrictions with smtpd_delay_reject = no, which
	// Postfix documents for slowing down zombie clients. A verifier whose
	// greeting timeout is shorter never hears a byte.
	Tarpit time.Duration
	// HangUp (Postfix only): smtpd accepts the connection, says nothing,
	// and closes it after this long without a byte: its client
	// restrictions ask a policy server that never answers (the world runs
	// one that accepts and stays silent) and smtpd's own watchdog
	// (daemon_timeout) ends the process first ("fatal: watchdog timeout").
	// Postfix's watchdog fires after daemon_timeout in steps of a third of
	// it, and the process exits a second after the fatal error, so HangUp
	// must be 3k+1 seconds, k >= 1: 4s, 7s, 10s...
	HangUp time.Duration
}

// DNSShape is how a domain appears in DNS.
type DNSShape string

const (
	// ShapeMX: an MX record naming the host (the default).
	ShapeMX DNSShape = ""
	// ShapeAOnly: no MX, an A record with the host's address: the implicit
	// MX of RFC 5321 §5.1.
	ShapeAOnly DNSShape = "a-only"
	// ShapeNullMX: "MX 0 ." (RFC 7505).
	ShapeNullMX DNSShape = "null-mx"
	// ShapeNXDomain: the name does not exist.
	ShapeNXDomain DNSShape = "nxdomain"
	// ShapeNoAddress: the name exists (a TXT record) but has no MX and no A.
	ShapeNoAddress DNSShape = "no-address"
)

// Domain is one mail domain of the world.
type Domain struct {
	Name  string // a name under Options.Zone, e.g. "acme.test"
	Shape DNSShape
	Host  string // the Host.Name serving it (ShapeMX, ShapeAOnly)

	Mailboxes []string // deliverable local parts
	// Full are mailboxes that exist but answer 552 5.2.2 (Postfix
	// check_recipient_access).
	Full []string
	// CatchAll accepts every local part.
	CatchAll bool
	// Policy rejects every recipient with 550 5.7.1 (Postfix
	// check_recipient_access on the domain).
	Policy bool
}

// World is the declared world.
type World struct {
	Hosts   []Host
	Domains []Domain
}

// Options tune Start.
type Options struct {
	// Port is the SMTP port of every host (0: one free on all of them).
	// AfterShip's verifier dials 25 only.
	Port int
	// Net is the /16 the world's addresses come from: hosts at .1.1 up,
	// DNS at .0.53, postgrey at .0.23, the kit's readiness probes from
	// .0.25 (left out of Counts). By default 127.B.0.0/16 with B
	// varying per process and world (16 to 239), so that worlds of
	// concurrent processes on one fixed port (25) stay apart; Start tries
	// another B when a daemon cannot bind.
	Net netip.Prefix
	// Zone is the DNS zone every name lives in (default "test"): NSD is
	// authoritative for it, and names absent from it are NXDOMAIN.
	Zone string
	// GreylistDelay is postgrey's --delay (default 5s; real sites: 60s to
	// 300s).
	GreylistDelay time.Duration
	// AnvilRateTimeUnit is anvil_rate_time_unit (default Postfix's 60s).
	AnvilRateTimeUnit time.Duration
	// PostscreenGreetWait is postscreen_greet_wait (default Postfix's 6s).
	PostscreenGreetWait time.Duration
	// PostfixMain adds or overrides main.cf parameters (e.g. in_flow_delay
	// = 0, default_process_limit).
	PostfixMain map[string]string
	// EximMain adds main-section settings to the Exim instance's
	// configuration (one daemon serves every Exim host), e.g.
	// recipients_max = 20 (past it Exim answers "452 too many recipients").
	EximMain map[string]string
	// Dir is where configurations, queues and logs go (default: a new
	// temporary directory, removed by Close unless KeepDir).
	Dir     string
	KeepDir bool
}

var worldSeq atomic.Uint32

// defaultNet is 127.B.0.0/16 for the next world of this process.
func defaultNet() netip.Prefix {
	b := 16 + (uint32(os.Getpid())*37+worldSeq.Add(1)*11)%224
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(b), 0, 0}), 16)
}

func (o *Options) defaults() error {
	if !o.Net.IsValid() {
		o.Net = defaultNet()
	}
	if o.Net.Bits() > 16 || !o.Net.Addr().Is4() || !o.Net.Addr().IsLoopback() {
		return fmt.Errorf("realmta: Net %s: want a loopback IPv4 prefix of /16 or wider", o.Net)
	}
	o.Net = o.Net.Masked()
	if o.Zone == "" {
		o.Zone = "test"
	}
	o.Zone = strings.Trim(strings.ToLower(o.Zone), ".")
	if o.GreylistDelay <= 0 {
		o.GreylistDelay = 5 * time.Second
	}
	for k, v := range o.EximMain {
		if k == "" || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" || strings.ContainsAny(v, "\n\r") {
			return fmt.Errorf("realmta: EximMain %q = %q: want a lower-case option name and a one-line value", k, v)
		}
	}
	return nil
}

// addr returns the /16's address a.b.x.y.
func (o *Options) addr(x, y byte) netip.Addr {
	b := o.Net.Addr().As4()
	return netip.AddrFrom4([4]byte{b[0], b[1], x, y})
}

// validate checks the world's names and references.
func (w *World) validate(zone string) error {
	hosts := map[string]*Host{}
	if len(w.Hosts) > 250*200 {
		return fmt.Errorf("realmta: %d hosts; at most %d", len(w.Hosts), 250*200)
	}
	inZone := func(n string) bool { return strings.HasSuffix(n, "."+zone) }
	greylist := false
	for i := range w.Hosts {
		h := &w.Hosts[i]
		if !inZone(h.Name) || strings.ContainsAny(h.Name, " ,/") {
			return fmt.Errorf("realmta: host %q: want a name under %s", h.Name, zone)
		}
		if hosts[h.Name] != nil {
			return fmt.Errorf("realmta: host %q declared twice", h.Name)
		}
		postfixOnly := h.Greylist || h.Postscreen || len(h.Postfix) > 0 || h.Tarpit != 0 || h.HangUp != 0
		limits := h.ConnRateLimit != 0 || h.ConnCountLimit != 0 || h.RecipientLimit != 0
		if h.BadRcptThrottle != 0 && h.Software != Sendmail {
			return fmt.Errorf("realmta: host %q: BadRcptThrottle is sendmail's", h.Name)
		}
		if (h.Karma || h.KarmaTarpitMax != 0 || h.ErrorLimit != 0) && h.Software != Haraka {
			return fmt.Errorf("realmta: host %q: Karma, KarmaTarpitMax and ErrorLimit are Haraka's", h.Name)
		}
		switch h.Software {
		case Postfix:
			if h.Tarpit < 0 || h.Tarpit%time.Second != 0 {
				return fmt.Errorf("realmta: host %q: Tarpit %v: want whole seconds", h.Name, h.Tarpit)
			}
			if k := h.HangUp - time.Second; h.HangUp != 0 && (k < 3*time.Second || k%(3*time.Second) != 0) {
				return fmt.Errorf("realmta: host %q: HangUp %v: want 3k+1 seconds, k >= 1 (4s, 7s, 10s...: Postfix's watchdog steps)", h.Name, h.HangUp)
			}
			if h.Tarpit != 0 && h.HangUp != 0 || (h.Tarpit != 0 || h.HangUp != 0) && h.Postscreen {
				return fmt.Errorf("realmta: host %q: Tarpit, HangUp and Postscreen are exclusive", h.Name)
			}
		case Sendmail, Haraka:
			if postfixOnly {
				return fmt.Errorf("realmta: host %q: Postfix settings on a %s host", h.Name, h.Software)
			}
		case Exim, Down:
			if postfixOnly || limits {
				return fmt.Errorf("realmta: host %q: Postfix settings on %s host", h.Name, map[Software]string{Exim: "an Exim", Down: "a down"}[h.Software])
			}
		default:
			return fmt.Errorf("realmta: host %q: software %q", h.Name, h.Software)
		}
		for k, v := range h.Postfix {
			if strings.ContainsAny(k+v, " \t\n,") {
				return fmt.Errorf("realmta: host %q: -o %s=%s has white space or a comma", h.Name, k, v)
			}
		}
		greylist = greylist || h.Greylist
		hosts[h.Name] = h
	}
	doms := map[string]bool{}
	for _, d := range w.Domains {
		if !inZone(d.Name) || d.Name != strings.ToLower(d.Name) {
			return fmt.Errorf("realmta: domain %q: want a lower-case name under %s", d.Name, zone)
		}
		if doms[d.Name] || hosts[d.Name] != nil {
			return fmt.Errorf("realmta: domain %q declared twice (or as a host)", d.Name)
		}
		doms[d.Name] = true
		switch d.Shape {
		case ShapeMX, ShapeAOnly:
			h := hosts[d.Host]
			if h == nil {
				return fmt.Errorf("realmta: domain %q: unknown host %q", d.Name, d.Host)
			}
			if h.Software != Postfix && (len(d.Full) > 0 || d.Policy) {
				return fmt.Errorf("realmta: domain %q: full mailboxes and policy rejects are Postfix-only", d.Name)
			}
		case ShapeNullMX, ShapeNXDomain, ShapeNoAddress:
			if d.Host != "" || len(d.Mailboxes)+len(d.Full) > 0 || d.CatchAll || d.Policy {
				return fmt.Errorf("realmta: domain %q (%s) takes no host or mailboxes", d.Name, d.Shape)
			}
		default:
			return fmt.Errorf("realmta: domain %q: shape %q", d.Name, d.Shape)
		}
		for _, l := range append(append([]string{}, d.Mailboxes...), d.Full...) {
			if l == "" || l != strings.ToLower(l) || strings.ContainsAny(l, " \t@,:\"") {
				return fmt.Errorf("realmta: domain %q: local part %q: want lower-case, no white space, @ , : or quotes", d.Name, l)
			}
		}
	}
	return nil
}
