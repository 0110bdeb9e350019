package mxdns

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/emaildata/emaildata/internal/kits/memnet"
)

// fakeDNS is a scriptable DNS server, on an in-memory network of its own,
// for cases mailworld does not model: CNAMEs, SERVFAIL, truncation, slow
// answers, MX hosts without addresses.
type fakeDNS struct {
	srv server

	mu       sync.Mutex
	rrs      map[string][]dns.RR // "name./TYPE"
	nx       map[string]bool
	servfail map[string]bool
	chase    bool // follow CNAMEs like a recursive resolver
	truncUDP bool // set TC on every UDP answer
	delay    time.Duration
	// loseUDP: the first UDP copy of each question (name and type) is
	// not answered, as if lost on the way.
	loseUDP bool
	counts  map[string]int // "name./TYPE" → queries
	udpN    int
	tcpN    int
	ports   map[string]bool // client addresses seen over UDP
}

func newFakeDNS(t testing.TB, records ...string) *fakeDNS {
	t.Helper()
	f := &fakeDNS{rrs: map[string][]dns.RR{}, nx: map[string]bool{}, servfail: map[string]bool{}, counts: map[string]int{}, chase: true}
	for _, s := range records {
		f.add(t, s)
	}
	n := memnet.New()
	pc, err := n.ListenPacket("udp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := n.Listen("tcp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	f.srv = server{addr: "127.0.0.1:53", net: n}
	started := make(chan struct{}, 2)
	var servers []*dns.Server
	for _, s := range []*dns.Server{{PacketConn: pc}, {Listener: ln}} {
		s.Handler = dns.HandlerFunc(f.serve)
		s.NotifyStartedFunc = func() { started <- struct{}{} }
		servers = append(servers, s)
		go s.ActivateAndServe()
	}
	<-started
	<-started
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	return f
}

func (f *fakeDNS) add(t testing.TB, s string) {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("NewRR(%q): %v", s, err)
	}
	k := strings.ToLower(rr.Header().Name) + "/" + dns.TypeToString[rr.Header().Rrtype]
	f.mu.Lock()
	f.rrs[k] = append(f.rrs[k], rr)
	f.mu.Unlock()
}

// set changes the server's behaviour under its lock.
func (f *fakeDNS) set(fn func(f *fakeDNS)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func (f *fakeDNS) transports() (udp, tcp int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.udpN, f.tcpN
}

func (f *fakeDNS) count(name, qtype string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[dns.Fqdn(name)+"/"+qtype]
}

func (f *fakeDNS) serve(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	f.mu.Lock()
	key := name + "/" + dns.TypeToString[q.Qtype]
	f.counts[key]++
	if udp && f.loseUDP && f.counts[key] == 1 {
		f.mu.Unlock()
		return
	}
	if udp {
		f.udpN++
		if f.ports == nil {
			f.ports = map[string]bool{}
		}
		f.ports[w.RemoteAddr().String()] = true
	} else {
		f.tcpN++
	}
	delay, trunc := f.delay, f.truncUDP && udp
	f.mu.Unlock()
	if delay > 0 {
		<-time.After(delay) // the server's own time to answer (simulated, in a bubble)
	}

	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if trunc {
		m.Truncated = true
		w.WriteMsg(m)
		return
	}
	soa, _ := dns.NewRR(". 30 IN SOA ns.fake. host.fake. 1 3600 600 86400 15")
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := name
	for hop := 0; ; hop++ {
		if f.servfail[cur] {
			m.Rcode = dns.RcodeServerFailure
			break
		}
		if f.nx[cur] {
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa}
			break
		}
		if rrs := f.rrs[cur+"/"+dns.TypeToString[q.Qtype]]; len(rrs) > 0 {
			m.Answer = append(m.Answer, rrs...)
			break
		}
		if c := f.rrs[cur+"/CNAME"]; len(c) > 0 {
			m.Answer = append(m.Answer, c[0])
			if !f.chase || hop > 10 {
				break
			}
			cur = strings.ToLower(c[0].(*dns.CNAME).Target)
			continue
		}
		m.Ns = []dns.RR{soa} // NODATA (or NXDOMAIN-ish unknown name: treat as NODATA)
		break
	}
	w.WriteMsg(m)
}
