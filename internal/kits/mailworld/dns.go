package mailworld

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// zoneNode holds the records of one owner name.
type zoneNode struct {
	mx, a, aaaa []dns.RR
	soa         *dns.SOA // set on zone apexes (domains, providers)
	zone        *dns.SOA // SOA for negative answers at or below this name
}

type dnsKey struct {
	name  string
	qtype uint16
}

// defaultNegTTL is the SOA MINIMUM of names outside every world domain.
const defaultNegTTL = 60

func newSOA(owner string, ttl uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: dns.Fqdn(owner), Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      "ns.mailworld.test.",
		Mbox:    "hostmaster.mailworld.test.",
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func hdr(name string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: dns.Fqdn(name), Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

func (w *World) node(name string) *zoneNode {
	n := w.zone[name]
	if n == nil {
		n = &zoneNode{}
		w.zone[name] = n
	}
	return n
}

func (w *World) buildZone() {
	w.zone = make(map[string]*zoneNode, len(w.domains)+len(w.hosts))
	nx := map[string]*dns.SOA{}
	for _, name := range w.order {
		ds := w.domains[name]
		ttl := ds.TTL
		if ds.NXDomain {
			nx[name] = newSOA(parent(name), ttl)
			continue
		}
		n := w.node(name)
		n.soa = newSOA(name, ttl)
		switch {
		case ds.NullMX:
			n.mx = append(n.mx, &dns.MX{Hdr: hdr(name, dns.TypeMX, ttl), Preference: 0, Mx: "."})
			n.a = append(n.a, &dns.A{Hdr: hdr(name, dns.TypeA, ttl), A: ds.sink.ip.AsSlice()})
		case ds.NoAddress:
		case ds.NoMX:
			n.a = append(n.a, &dns.A{Hdr: hdr(name, dns.TypeA, ttl), A: ds.group.hosts[0].ip.AsSlice()})
		default:
			for _, h := range ds.group.hosts {
				n.mx = append(n.mx, &dns.MX{Hdr: hdr(name, dns.TypeMX, ttl), Preference: h.pref, Mx: dns.Fqdn(h.name)})
			}
		}
	}
	for _, g := range w.groups {
		if g.implied {
			continue
		}
		if w.zone[g.name] == nil { // provider outside the world's domains
			w.node(g.name).soa = newSOA(g.name, g.ttl)
		}
		for _, h := range g.hosts {
			n := w.node(h.name)
			n.a = append(n.a, &dns.A{Hdr: hdr(h.name, dns.TypeA, g.ttl), A: h.ip.AsSlice()})
		}
	}
	// Negative-answer SOA of each node: its own, or the closest apex above.
	for name, n := range w.zone {
		n.zone = w.enclosingSOA(name, nx)
	}
	w.nxSOA = nx
}

func parent(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return "."
}

// enclosingSOA finds the SOA governing name: the closest apex at or above
// it, an NXDomain domain's synthetic SOA, or a default one at the TLD.
func (w *World) enclosingSOA(name string, nx map[string]*dns.SOA) *dns.SOA {
	for s := name; s != "." && s != ""; s = parent(s) {
		if n := w.zone[s]; n != nil && n.soa != nil {
			return n.soa
		}
		if soa := nx[s]; soa != nil {
			return soa
		}
	}
	tld := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		tld = name[i+1:]
	}
	return newSOA(tld, defaultNegTTL)
}

func (w *World) startDNS() error {
	host, portStr, err := net.SplitHostPort(w.opts.DNSAddr)
	if err != nil {
		return err
	}
	tries := 1
	if portStr == "0" {
		tries = 50
	}
	listen, listenPacket := net.Listen, net.ListenPacket
	if nw := w.opts.Network; nw != nil {
		listen, listenPacket = nw.Listen, nw.ListenPacket
	}
	var pc net.PacketConn
	var ln net.Listener
	for try := 0; try < tries; try++ {
		pc, err = listenPacket("udp", w.opts.DNSAddr)
		if err != nil {
			continue
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err = listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if err != nil {
		return fmt.Errorf("mailworld: DNS listen on %s: %w", w.opts.DNSAddr, err)
	}
	w.dnsAddr = pc.LocalAddr().String()
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	handler := dns.HandlerFunc(w.serveDNS)
	w.dnsUDP = &dns.Server{PacketConn: pc, Handler: handler, NotifyStartedFunc: notify}
	w.dnsTCP = &dns.Server{Listener: ln, Handler: handler, NotifyStartedFunc: notify,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	for _, s := range []*dns.Server{w.dnsUDP, w.dnsTCP} {
		go s.ActivateAndServe() //nolint:errcheck // returns on Shutdown
	}
	timeout := time.After(5 * time.Second)
	for i := 0; i < 2; i++ {
		select {
		case <-started:
		case <-timeout:
			pc.Close()
			ln.Close()
			return errors.New("mailworld: DNS server did not start")
		}
	}
	return nil
}

func (w *World) serveDNS(rw dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.RecursionAvailable = true
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		rw.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := canon(q.Name)
	w.dnsN.Add(1)
	w.dnsMu.Lock()
	w.dnsQ[dnsKey{name, q.Qtype}]++
	w.dnsMu.Unlock()

	switch n := w.zone[name]; {
	case q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY:
		m.Rcode = dns.RcodeRefused
	case n == nil:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{w.enclosingSOA(name, w.nxSOA)}
	default:
		switch q.Qtype {
		case dns.TypeMX:
			m.Answer = n.mx
		case dns.TypeA:
			m.Answer = n.a
		case dns.TypeAAAA:
			m.Answer = n.aaaa
		case dns.TypeSOA:
			if n.soa != nil {
				m.Answer = []dns.RR{n.soa}
			}
		case dns.TypeANY:
			m.Answer = append(append(append([]dns.RR(nil), n.mx...), n.a...), n.aaaa...)
		}
		if len(m.Answer) == 0 {
			m.Ns = []dns.RR{n.zone}
		}
	}
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(max(opt.UDPSize(), dns.MinMsgSize), false)
	}
	if _, udp := rw.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size)
	}
	rw.WriteMsg(m)
}

// DNSQueries returns how many questions for (name, qtype) the DNS server
// answered; name is case-insensitive without trailing dot, qtype e.g. "MX",
// "A", "AAAA", "SOA".
func (w *World) DNSQueries(name, qtype string) int {
	t, ok := dns.StringToType[strings.ToUpper(qtype)]
	if !ok {
		return 0
	}
	w.dnsMu.Lock()
	defer w.dnsMu.Unlock()
	return w.dnsQ[dnsKey{canon(name), t}]
}
