package realmta

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// --- Exim --------------------------------------------------------------

// Exim runs as one daemon (`exim -C conf -bdf`, in the foreground)
// listening on every Exim host's address, with Exim's defaults but for
// what a private, non-delivering instance needs: its own spool, logs and
// pid file, no reverse DNS or ident lookups, no TLS, queue_only, and DATA
// refused before the message (acl_smtp_predata). Mailboxes are an lsearch
// file of local@domain keys ("*@domain" for a catch-all, found by
// lsearch*@); an unknown user fails "verify = recipient" at RCPT with Exim's
// "550 Unrouteable address". Accepted RCPTs are logged with logwrite, so
// that the log shows every RCPT.
func (r *Running) writeExim() (string, error) {
	d := filepath.Join(r.dir, "exim")
	for _, sub := range []string{"spool", "log"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return "", err
		}
	}
	eu, err := user.Lookup("Debian-exim")
	if err != nil {
		return "", fmt.Errorf("realmta: %w (run hack/install-mail-servers.sh)", err)
	}
	uid, _ := strconv.Atoi(eu.Uid)
	gid, _ := strconv.Atoi(eu.Gid)
	for _, sub := range []string{"spool", "log"} {
		if err := os.Chown(filepath.Join(d, sub), uid, gid); err != nil {
			return "", err
		}
	}
	var domains, users, names strings.Builder
	for _, dm := range r.World.Domains {
		if h, ok := r.host(dm.Host); !ok || h.Software != Exim {
			continue
		}
		fmt.Fprintf(&domains, "%s\n", dm.Name)
		if dm.CatchAll {
			fmt.Fprintf(&users, "*@%s\n", dm.Name)
		}
		for _, l := range dm.Mailboxes {
			fmt.Fprintf(&users, "%s@%s\n", l, dm.Name)
		}
	}
	var ifaces []string
	for _, a := range r.addrsOf(Exim) {
		ifaces = append(ifaces, fmt.Sprintf("%s.%d", a, r.port))
	}
	for _, h := range r.World.Hosts {
		if h.Software == Exim {
			fmt.Fprintf(&names, "%s: %s\n", r.hostAddr[h.Name], h.Name)
		}
	}
	conf := fmt.Sprintf(`# realmta: a private Exim; defaults kept unless noted.
exim_path = %[2]s
primary_hostname = exim.%[3]s
smtp_active_hostname = ${lookup{$received_ip_address}lsearch{%[1]s/hostnames}{$value}{$primary_hostname}}
local_interfaces = <; %[4]s
spool_directory = %[1]s/spool
log_file_path = %[1]s/log/%%slog
pid_file_path = %[1]s/exim.pid
log_selector = +smtp_connection +incoming_interface +incoming_port
keep_environment =
tls_advertise_hosts =
host_lookup =
rfc1413_hosts =
rfc1413_query_timeout = 0s
queue_only = true
domainlist local_domains = lsearch;%[1]s/domains
acl_smtp_rcpt = acl_check_rcpt
acl_smtp_predata = acl_check_predata
%[5]s
begin acl

acl_check_rcpt:
  deny    message = relay not permitted
          !domains = +local_domains
  require verify = recipient
  accept  logwrite = rcpt accepted <$local_part@$domain> I=[$received_ip_address]:$received_port

acl_check_predata:
  deny    message = this test world accepts no message

begin routers

mailboxes:
  driver = accept
  domains = +local_domains
  condition = ${lookup{$local_part@$domain}lsearch*@{%[1]s/users}{yes}{no}}
  transport = nowhere

begin transports

nowhere:
  driver = appendfile
  file = /dev/null
`, d, r.bins.Exim, r.opt.Zone, strings.Join(ifaces, " ; "), eximExtra(r.opt.EximMain))
	files := map[string]string{"exim.conf": conf, "domains": domains.String(), "users": users.String(), "hostnames": names.String()}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(d, "exim.conf"), nil
}

// eximExtra is Options.EximMain as main-section lines, sorted.
func eximExtra(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, m[k])
	}
	return b.String()
}

func (r *Running) startExim(conf string) error {
	p, err := startProc("exim", filepath.Join(r.dir, "log", "exim.out"), r.bins.Exim, "-C", conf, "-bdf")
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	return r.waitServing(p, r.addrsOf(Exim), r.greetingAddrs(Exim), startWait)
}

// --- a policy server that never answers ---------------------------------

// silentServer accepts TCP connections and never sends a byte, until the
// client closes them: the policy server of HangUp hosts (a hung policy
// daemon, as Postfix sites meet them). It runs in this process.
type silentServer struct {
	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	done  sync.WaitGroup
}

func startSilent(ip netip.Addr) (*silentServer, error) {
	l, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return nil, fmt.Errorf("realmta: silent policy server: listen: %w", err)
	}
	s := &silentServer{l: l, conns: map[net.Conn]bool{}}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.done.Add(1)
			go func() {
				defer s.done.Done()
				_, _ = io.Copy(io.Discard, c) // until smtpd is gone
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
		}
	}()
	return s, nil
}

func (s *silentServer) addr() string { return s.l.Addr().String() }

func (s *silentServer) close() {
	s.l.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.done.Wait()
}

// --- postgrey ----------------------------------------------------------

// startPostgrey runs postgrey in the foreground on the world's policy
// address with the configured delay. Auto-whitelisting of clients is off
// (postgrey would otherwise let a client through without delay after 5
// passed triplets), so every new (client, sender, recipient) triplet is
// greylisted. With no syslog it logs its decisions on stderr.
func (r *Running) startPostgrey() error {
	d := filepath.Join(r.dir, "postgrey")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	pu, err := user.Lookup("postgrey")
	if err != nil {
		return fmt.Errorf("realmta: %w (is postgrey installed?)", err)
	}
	uid, _ := strconv.Atoi(pu.Uid)
	gid, _ := strconv.Atoi(pu.Gid)
	if err := os.Chown(d, uid, gid); err != nil {
		return err
	}
	p, err := startProc("postgrey", filepath.Join(r.dir, "log", "postgrey.log"), r.bins.Postgrey,
		"--inet="+r.greyAddr.String(), "--dbdir="+d, "--delay="+strconv.Itoa(max(1, int(r.opt.GreylistDelay/time.Second))),
		"--auto-whitelist-clients=0", "--hostname=postgrey."+r.opt.Zone, "--pidfile="+filepath.Join(d, "postgrey.pid"))
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	return waitListening(p, []netip.Addr{r.greyAddr.Addr()}, int(r.greyAddr.Port()), startWait)
}

// --- NSD ---------------------------------------------------------------

// startNSD serves the world's zone from NSD in the foreground (-d), as
// root without chroot (username ""), UDP and TCP on the DNS address.
func (r *Running) startNSD() error {
	d := filepath.Join(r.dir, "nsd")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`server:
  ip-address: %[2]s@%[3]d
  port: %[3]d
  username: ""
  chroot: ""
  zonesdir: "%[1]s"
  zonelistfile: "%[1]s/zone.list"
  database: ""
  xfrdfile: "%[1]s/xfrd.state"
  xfrdir: "%[1]s"
  pidfile: "%[1]s/nsd.pid"
  logfile: "%[4]s"
  verbosity: 1
  server-count: 1
  do-ip6: no
  hide-version: yes
  # No response rate limiting: verifiers query it directly, as they would
  # a recursive resolver, hundreds of times a second from one address.
  rrl-ratelimit: 0
  rrl-whitelist-ratelimit: 0
remote-control:
  control-enable: no
zone:
  name: "%[5]s"
  zonefile: "world.zone"
`, d, r.dnsAddr.Addr(), r.dnsAddr.Port(), filepath.Join(r.dir, "log", "nsd.log"), r.opt.Zone)
	if err := os.WriteFile(filepath.Join(d, "nsd.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "world.zone"), []byte(r.zoneFile()), 0o644); err != nil {
		return err
	}
	p, err := startProc("nsd", filepath.Join(r.dir, "log", "nsd.out"), r.bins.NSD, "-d", "-c", filepath.Join(d, "nsd.conf"))
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	// Ready when it answers for the zone's SOA.
	deadline := time.Now().Add(startWait)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(r.opt.Zone), dns.TypeSOA)
	for {
		in, _, err := c.ExchangeContext(context.Background(), m, r.dnsAddr.String())
		if err == nil && in.Rcode == dns.RcodeSuccess && len(in.Answer) > 0 {
			return nil
		}
		if p.exited() || time.Now().After(deadline) {
			return fmt.Errorf("realmta: NSD does not answer on %s (%v): %s %s", r.dnsAddr, err, p.tail(), tailFile(filepath.Join(r.dir, "log", "nsd.log"), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// zoneFile is the world's zone: the hosts' A records, and per domain its
// MX, A, null MX or TXT record (NXDOMAIN domains have none).
func (r *Running) zoneFile() string {
	z := r.opt.Zone + "."
	rel := func(name string) string { return strings.TrimSuffix(name, "."+r.opt.Zone) }
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL 300\n", z)
	fmt.Fprintf(&b, "@ IN SOA ns.%[1]s hostmaster.%[1]s 1 3600 600 86400 60\n@ IN NS ns.%[1]s\nns IN A %[2]s\n", z, r.dnsAddr.Addr())
	for _, h := range r.World.Hosts {
		fmt.Fprintf(&b, "%s IN A %s\n", rel(h.Name), r.hostAddr[h.Name])
	}
	for _, d := range r.World.Domains {
		n := rel(d.Name)
		switch d.Shape {
		case ShapeMX:
			fmt.Fprintf(&b, "%s IN MX 10 %s.\n", n, d.Host)
		case ShapeAOnly:
			fmt.Fprintf(&b, "%s IN A %s\n", n, r.hostAddr[d.Host])
		case ShapeNullMX:
			fmt.Fprintf(&b, "%s IN MX 0 .\n", n)
		case ShapeNoAddress:
			fmt.Fprintf(&b, "%s IN TXT \"no mail here\"\n", n)
		}
	}
	return b.String()
}

func killPid(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
