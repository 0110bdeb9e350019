package mailworld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func start(t testing.TB, domains []Domain, opts Options) *World {
	t.Helper()
	w, err := Start(context.Background(), domains, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// client is a raw SMTP client on net/textproto.
type client struct {
	t  testing.TB
	nc net.Conn
	tp *textproto.Conn
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &client{t: t, nc: nc, tp: textproto.NewConn(nc)}
	t.Cleanup(func() { nc.Close() })
	return c
}

func (c *client) read() (int, string, error) {
	return c.tp.ReadResponse(0)
}

// expect reads one reply and checks its code (and that msg contains want).
func (c *client) expect(code int, want string) string {
	c.t.Helper()
	got, msg, err := c.read()
	if err != nil && got == 0 {
		c.t.Fatalf("reading reply (want %d): %v", code, err)
	}
	if got != code || !strings.Contains(msg, want) {
		c.t.Fatalf("reply %d %q, want %d containing %q", got, msg, code, want)
	}
	return msg
}

func (c *client) send(format string, args ...any) {
	c.t.Helper()
	if err := c.tp.PrintfLine(format, args...); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// do sends a command and checks the reply.
func (c *client) do(code int, want, format string, args ...any) string {
	c.t.Helper()
	c.send(format, args...)
	return c.expect(code, want)
}

// openSession dials the first working MX of domain, reads the greeting and
// sends EHLO and MAIL FROM.
func openSession(t testing.TB, w *World, domain, from string) *client {
	t.Helper()
	addrs := w.MXAddrs(domain)
	if len(addrs) == 0 {
		t.Fatalf("%s has no MX", domain)
	}
	c := dial(t, addrs[len(addrs)-1])
	c.expect(220, "ESMTP")
	c.do(250, "PIPELINING", "EHLO verifier.test")
	c.do(250, "2.1.0", "MAIL FROM:<%s>", from)
	return c
}

func TestSMTPMailboxBehaviours(t *testing.T) {
	w := start(t, []Domain{
		{Name: "example.test", Mailboxes: map[string]Behaviour{
			"alice": Exists, "Bob": Full, "carol": Disabled, "dave": TempFail, "eve": CatchAll, "mallory": Missing,
		}},
		{Name: "other.test", Mailboxes: map[string]Behaviour{"x": Exists}},
		{Name: "policy.test", PolicyReject: true, Mailboxes: map[string]Behaviour{"alice": Exists}},
	}, Options{})
	c := openSession(t, w, "example.test", "probe@verifier.test")
	for _, tc := range []struct {
		rcpt string
		code int
		want string
	}{
		{"alice@example.test", 250, "2.1.5"},
		{"ALICE@Example.TEST", 250, "2.1.5"},
		{"bob@example.test", 552, "5.2.2"},
		{"carol@example.test", 550, "5.2.1"},
		{"dave@example.test", 450, "4.2.1"},
		{"eve@example.test", 250, "2.1.5"},
		{"mallory@example.test", 550, "5.1.1"},
		{"nobody@example.test", 550, "5.1.1"},
		{"postmaster@example.test", 250, "2.1.5"},
		{"x@other.test", 550, "Relay access denied"}, // other domain, other host
		{"x@unknown.test", 550, "5.7.1"},
	} {
		c.do(tc.code, tc.want, "RCPT TO:<%s>", tc.rcpt)
	}
	c.do(501, "Syntax", "RCPT TO:")
	c.do(501, "Bad recipient", "RCPT TO:<no-at-sign>")
	c.do(250, "2.1.5", "RCPT TO:<postmaster>")
	c.do(250, "", "RSET")
	c.do(503, "need MAIL", "RCPT TO:<alice@example.test>")
	c.do(252, "2.5.2", "VRFY alice")
	c.do(250, "", "NOOP")
	c.do(500, "not recognized", "FOO bar")
	c.do(502, "not implemented", "STARTTLS")
	c.do(500, "line too long", "NOOP %s", strings.Repeat("x", 5000))
	c.do(250, "", "NOOP") // still in sync after the long line
	c.do(221, "Bye", "QUIT")

	p := openSession(t, w, "policy.test", "probe@verifier.test")
	p.do(550, "5.7.1", "RCPT TO:<alice@policy.test>")

	st := w.Stats()
	if st.DATA != 0 {
		t.Fatalf("DATA = %d", st.DATA)
	}
	if st.RCPT != 16 || st.RSET != 1 || st.MAIL != 2 || st.EHLO != 2 || st.Connections != 2 {
		t.Fatalf("stats: %+v", st)
	}
	if st.MailFrom["probe@verifier.test"] != 2 || st.EHLONames["verifier.test"] != 2 {
		t.Fatalf("names: %v %v", st.MailFrom, st.EHLONames)
	}
	hs := st.Hosts["mx1.example.test"]
	if hs.RCPT != 15 || hs.Total != 1 || hs.Addr != w.MXAddrs("example.test")[0] {
		t.Fatalf("host stats: %+v", hs)
	}
}

func TestSMTPProtocolErrorsAndData(t *testing.T) {
	w := start(t, []Domain{{Name: "example.test", Mailboxes: map[string]Behaviour{"alice": Exists}}}, Options{})
	c := dial(t, w.MXAddrs("example.test")[0])
	c.expect(220, "mx1.example.test")
	c.do(503, "HELO/EHLO first", "MAIL FROM:<a@b.test>")
	c.do(501, "Syntax", "EHLO")
	c.do(250, "mx1.example.test", "HELO client.test")
	c.do(501, "Syntax", "MAIL TO:<a@b.test>")
	c.do(250, "2.1.0", "MAIL FROM:<>")
	c.do(503, "nested", "MAIL FROM:<a@b.test>")
	c.do(550, "5.1.1", "RCPT TO:<bob@example.test>")
	c.do(554, "no valid recipients", "DATA")
	c.do(250, "2.1.5", "RCPT TO: <alice@example.test> NOTIFY=NEVER")
	c.do(354, "End data", "DATA")
	c.send("Subject: hi\r\n\r\n..not the end\r\n%s\r\n.", strings.Repeat("y", 5000))
	c.expect(250, "queued")
	c.do(503, "need RCPT", "DATA")
	if st := w.Stats(); st.DATA != 3 || st.MailFrom[""] != 1 || st.EHLONames["client.test"] != 1 {
		t.Fatalf("stats: DATA=%d MailFrom=%v EHLO=%v", st.DATA, st.MailFrom, st.EHLONames)
	}
	// Too many errors end the session (5 errors so far).
	for i := 5; i < maxBadCmds; i++ {
		c.do(500, "", "BOGUS")
	}
	c.do(421, "too many errors", "BOGUS")
	if _, _, err := c.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("after 421: %v", err)
	}
}

func TestSMTPPipelining(t *testing.T) {
	w := start(t, []Domain{{Name: "example.test", Mailboxes: map[string]Behaviour{"a": Exists}}}, Options{})
	c := dial(t, w.MXAddrs("example.test")[0])
	c.expect(220, "")
	// Everything in one write.
	if _, err := io.WriteString(c.nc, "EHLO p.test\r\nMAIL FROM:<s@p.test>\r\nRCPT TO:<a@example.test>\r\nRCPT TO:<b@example.test>\r\nRSET\r\nQUIT\r\n"); err != nil {
		t.Fatal(err)
	}
	c.expect(250, "SMTPUTF8")
	c.expect(250, "2.1.0")
	c.expect(250, "2.1.5")
	c.expect(550, "5.1.1")
	c.expect(250, "Ok")
	c.expect(221, "Bye")
}

func TestGreylist(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	w := start(t, []Domain{{Name: "grey.test", Greylist: time.Minute, Mailboxes: map[string]Behaviour{"a": Exists}}},
		Options{Now: clock})
	c := openSession(t, w, "grey.test", "s1@v.test")
	c.do(451, "4.7.1", "RCPT TO:<a@grey.test>")
	c.do(451, "4.7.1", "RCPT TO:<b@grey.test>")
	advance(30 * time.Second)
	c.do(451, "4.7.1", "RCPT TO:<a@grey.test>") // still inside the window
	advance(31 * time.Second)
	c.do(250, "2.1.5", "RCPT TO:<a@grey.test>")
	c.do(550, "5.1.1", "RCPT TO:<b@grey.test>") // window passed: real answer
	c.do(250, "", "RSET")
	c.do(250, "", "MAIL FROM:<s2@v.test>")
	c.do(451, "4.7.1", "RCPT TO:<a@grey.test>") // new (sender, rcpt) pair
	if got := w.GroundTruth("a@grey.test"); got != TruthGreylisted {
		t.Fatalf("GroundTruth = %q", got)
	}
	if got := w.UnderlyingTruth("a@grey.test"); got != TruthDeliverable {
		t.Fatalf("UnderlyingTruth = %q", got)
	}
}

func TestGreylistRealClock(t *testing.T) {
	w := start(t, []Domain{{Name: "grey.test", Greylist: 150 * time.Millisecond, DefaultBehaviour: CatchAll}}, Options{})
	c := openSession(t, w, "grey.test", "s@v.test")
	c.do(451, "4.7.1", "RCPT TO:<x@grey.test>")
	time.Sleep(200 * time.Millisecond)
	c.do(250, "2.1.5", "RCPT TO:<x@grey.test>")
}

func TestSecondRCPT452(t *testing.T) {
	w := start(t, []Domain{{Name: "one.test", SecondRCPT452: true, Mailboxes: map[string]Behaviour{"a": Exists}}}, Options{})
	c := openSession(t, w, "one.test", "s@v.test")
	c.do(550, "5.1.1", "RCPT TO:<zz@one.test>")
	c.do(452, "4.5.3", "RCPT TO:<a@one.test>")
	c.do(452, "4.5.3", "RCPT TO:<a@one.test>")
	c.do(250, "", "RSET")
	c.do(250, "", "MAIL FROM:<s@v.test>")
	c.do(250, "2.1.5", "RCPT TO:<a@one.test>")
	c.do(452, "4.5.3", "RCPT TO:<zz@one.test>")
}

func TestTarpit(t *testing.T) {
	w := start(t, []Domain{{Name: "slow.test", Tarpit: true}}, Options{})
	nc, err := net.Dial("tcp", w.MXAddrs("slow.test")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := nc.Read(make([]byte, 64))
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("tarpit read: n=%d err=%v", n, err)
	}
	if st := w.Stats().Hosts["mx1.slow.test"]; st.Current != 1 || st.Total != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got := w.GroundTruth("a@slow.test"); got != TruthTimeout {
		t.Fatalf("truth %q", got)
	}
}

func TestDropConnection(t *testing.T) {
	w := start(t, []Domain{
		{Name: "drop.test", DropConnection: true},
		{Name: "droprcpt.test", DropAtRCPT: true, DefaultBehaviour: CatchAll},
	}, Options{})
	c := dial(t, w.MXAddrs("drop.test")[0])
	c.expect(220, "")
	c.send("EHLO v.test")
	if _, _, err := c.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("drop at EHLO: %v", err)
	}
	c = openSession(t, w, "droprcpt.test", "s@v.test")
	c.send("RCPT TO:<a@droprcpt.test>")
	if _, _, err := c.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("drop at RCPT: %v", err)
	}
	for _, a := range []string{"a@drop.test", "a@droprcpt.test"} {
		if got := w.GroundTruth(a); got != TruthUnconfirmed {
			t.Fatalf("%s: %q", a, got)
		}
	}
}

func TestPrimaryDown(t *testing.T) {
	w := start(t, []Domain{{Name: "pd.test", PrimaryDown: true, DefaultBehaviour: CatchAll}}, Options{})
	addrs := w.MXAddrs("pd.test")
	if len(addrs) != 2 {
		t.Fatalf("addrs %v", addrs)
	}
	_, err := net.DialTimeout("tcp", addrs[0], time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("primary: %v", err)
	}
	c := dial(t, addrs[1])
	c.expect(220, "mx2.pd.test")
	if st := w.Stats(); !st.Hosts["mx1.pd.test"].Down || st.Hosts["mx2.pd.test"].Total != 1 {
		t.Fatalf("stats %+v", st.Hosts)
	}
}

func TestMaxConnsAndConcurrency(t *testing.T) {
	w := start(t, []Domain{{Name: "busy.test", MaxConns: 3}, {Name: "wide.test"}}, Options{})
	var cs []*client
	for i := 0; i < 3; i++ {
		c := dial(t, w.MXAddrs("busy.test")[0])
		c.expect(220, "")
		cs = append(cs, c)
	}
	extra := dial(t, w.MXAddrs("busy.test")[0])
	extra.expect(421, "too many connections")
	for _, c := range cs {
		c.do(221, "", "QUIT")
	}

	const n = 40
	for i := 0; i < n; i++ {
		c := dial(t, w.MXAddrs("wide.test")[0])
		c.expect(220, "")
		cs = append(cs, c)
	}
	st := w.Stats()
	if hs := st.Hosts["mx1.wide.test"]; hs.Current != n || hs.MaxConcurrent != n {
		t.Fatalf("wide: %+v", hs)
	}
	if hs := st.Hosts["mx1.busy.test"]; hs.MaxConcurrent != 4 || hs.Rejected != 1 || hs.Total != 4 {
		t.Fatalf("busy: %+v", hs)
	}
	if st.PeakConcurrent < n {
		t.Fatalf("peak %d", st.PeakConcurrent)
	}
	for _, c := range cs[3:] {
		c.nc.Close()
	}
	waitFor(t, func() bool { return w.Stats().Current == 0 })
	w.ResetStats()
	if st := w.Stats(); st.Connections != 0 || st.Hosts["mx1.wide.test"].MaxConcurrent != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestIdleTimeoutAndLatency(t *testing.T) {
	w := start(t, []Domain{{Name: "x.test"}}, Options{IdleTimeout: 200 * time.Millisecond, Latency: 50 * time.Millisecond})
	t0 := time.Now()
	c := dial(t, w.MXAddrs("x.test")[0])
	c.expect(220, "")
	c.do(250, "", "NOOP")
	if d := time.Since(t0); d < 100*time.Millisecond {
		t.Fatalf("two replies took %v, want >= 100ms", d)
	}
	if _, _, err := c.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle: %v", err)
	}
}

func TestProviderSharedHosts(t *testing.T) {
	w := start(t, []Domain{
		{Name: "a.test", Provider: "bigmail.test", MXHosts: 2, Mailboxes: map[string]Behaviour{"x": Exists}},
		{Name: "b.test", Provider: "bigmail.test", MXHosts: 2, DefaultBehaviour: CatchAll},
		{Name: "c.test", MXHosts: 2},
	}, Options{})
	if got, want := w.MXHostNames("b.test"), []string{"mx1.bigmail.test", "mx2.bigmail.test"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hosts %v", got)
	}
	if fmt.Sprint(w.MXAddrs("a.test")) != fmt.Sprint(w.MXAddrs("b.test")) {
		t.Fatal("a and b should share addresses")
	}
	c := openSession(t, w, "a.test", "s@v.test")
	c.do(250, "", "RCPT TO:<x@a.test>")
	c.do(550, "5.1.1", "RCPT TO:<y@a.test>")
	c.do(250, "", "RCPT TO:<y@b.test>")
	c.do(550, "Relay", "RCPT TO:<y@c.test>")

	_, err := Start(context.Background(), []Domain{
		{Name: "a.test", Provider: "p.test", Tarpit: true},
		{Name: "b.test", Provider: "p.test"},
	}, Options{})
	if err == nil || !strings.Contains(err.Error(), "connection-level") {
		t.Fatalf("want conflict error, got %v", err)
	}
}

func TestStartValidation(t *testing.T) {
	for _, ds := range [][]Domain{
		{{Name: "bad name!"}},
		{{Name: "a.test"}, {Name: "A.test."}},
		{{Name: "a.test", NXDomain: true, NoMX: true}},
		{{Name: "a.test", NoMX: true, Provider: "p.test"}},
	} {
		if w, err := Start(context.Background(), ds, Options{}); err == nil {
			w.Close()
			t.Errorf("Start(%+v) succeeded", ds)
		}
	}
	if _, err := Start(context.Background(), nil, Options{DNSAddr: "10.0.0.1:53"}); err == nil {
		t.Error("non-loopback DNSAddr accepted")
	}
}

func query(t testing.TB, w *World, net, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	c := &dns.Client{Net: net, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, w.DNSAddr())
	if err != nil {
		t.Fatalf("query %s %s: %v", name, dns.TypeToString[qtype], err)
	}
	if !r.RecursionAvailable || !r.RecursionDesired || !r.Authoritative {
		t.Fatalf("flags: %v", r.MsgHdr)
	}
	return r
}

func TestDNS(t *testing.T) {
	w := start(t, []Domain{
		{Name: "ok.test", MXHosts: 3, TTL: 42},
		{Name: "nx.test", NXDomain: true, TTL: 7},
		{Name: "null.test", NullMX: true},
		{Name: "implicit.test", NoMX: true},
		{Name: "noaddr.test", NoAddress: true, TTL: 9},
	}, Options{})
	for _, netw := range []string{"udp", "tcp"} {
		r := query(t, w, netw, "OK.test", dns.TypeMX)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 3 {
			t.Fatalf("%s MX: %v", netw, r)
		}
		for i, rr := range r.Answer {
			mx := rr.(*dns.MX)
			if mx.Preference != uint16(10*(i+1)) || mx.Mx != fmt.Sprintf("mx%d.ok.test.", i+1) || mx.Hdr.Ttl != 42 {
				t.Fatalf("MX %d: %v", i, mx)
			}
		}
	}
	r := query(t, w, "udp", "mx2.ok.test", dns.TypeA)
	if len(r.Answer) != 1 || net.JoinHostPort(r.Answer[0].(*dns.A).A.String(), fmt.Sprint(w.SMTPPort())) != w.MXAddrs("ok.test")[1] {
		t.Fatalf("A mx2: %v (want %s)", r.Answer, w.MXAddrs("ok.test")[1])
	}
	// NODATA with SOA.
	r = query(t, w, "udp", "mx2.ok.test", dns.TypeAAAA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 || r.Ns[0].Header().Name != "ok.test." {
		t.Fatalf("AAAA: %v", r)
	}
	// NXDOMAIN with SOA, for the NX domain, names below it and unknown names.
	for _, n := range []string{"nx.test", "mx1.nx.test", "unknown.test", "nope.ok.test"} {
		r = query(t, w, "udp", n, dns.TypeMX)
		if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Fatalf("%s: %v", n, r)
		}
	}
	if soa := query(t, w, "udp", "nx.test", dns.TypeA).Ns[0].(*dns.SOA); soa.Minttl != 7 {
		t.Fatalf("nx SOA %v", soa)
	}
	r = query(t, w, "udp", "null.test", dns.TypeMX)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.MX).Mx != "." || r.Answer[0].(*dns.MX).Preference != 0 {
		t.Fatalf("null MX: %v", r)
	}
	if r = query(t, w, "udp", "implicit.test", dns.TypeMX); len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("implicit MX: %v", r)
	}
	r = query(t, w, "udp", "implicit.test", dns.TypeA)
	if len(r.Answer) != 1 || net.JoinHostPort(r.Answer[0].(*dns.A).A.String(), fmt.Sprint(w.SMTPPort())) != w.MXAddrs("implicit.test")[0] {
		t.Fatalf("implicit A: %v", r)
	}
	for _, qt := range []uint16{dns.TypeMX, dns.TypeA} {
		r = query(t, w, "udp", "noaddr.test", qt)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || r.Ns[0].(*dns.SOA).Minttl != 9 {
			t.Fatalf("noaddr: %v", r)
		}
	}
	if r = query(t, w, "udp", "ok.test", dns.TypeSOA); len(r.Answer) != 1 {
		t.Fatalf("SOA: %v", r)
	}
	if got := w.DNSQueries("ok.test", "MX"); got != 2 {
		t.Fatalf("DNSQueries(ok.test, MX) = %d", got)
	}
	if got := w.DNSQueries("noaddr.test", "a"); got != 1 {
		t.Fatalf("DNSQueries(noaddr.test, A) = %d", got)
	}
	if w.Stats().DNSQueries != 15 {
		t.Fatalf("total DNS queries %d", w.Stats().DNSQueries)
	}
}

func TestGroundTruth(t *testing.T) {
	w := start(t, []Domain{
		{Name: "ok.test", Mailboxes: map[string]Behaviour{"a": Exists, "f": Full, "d": Disabled, "t": TempFail}},
		{Name: "all.test", DefaultBehaviour: CatchAll, Mailboxes: map[string]Behaviour{"f": Full, "a": Exists}},
		{Name: "nx.test", NXDomain: true},
		{Name: "null.test", NullMX: true},
		{Name: "noaddr.test", NoAddress: true},
		{Name: "implicit.test", NoMX: true, Mailboxes: map[string]Behaviour{"a": Exists}},
		{Name: "pol.test", PolicyReject: true, Mailboxes: map[string]Behaviour{"a": Exists}},
		{Name: "pd.test", PrimaryDown: true, Mailboxes: map[string]Behaviour{"a": Exists}},
	}, Options{})
	for addr, want := range map[string]string{
		"a@ok.test": TruthDeliverable, "A@OK.TEST": TruthDeliverable, "zz@ok.test": TruthMissing,
		"f@ok.test": TruthFull, "d@ok.test": TruthMissing, "t@ok.test": TruthUnconfirmed,
		"postmaster@ok.test": TruthDeliverable,
		"a@all.test":         TruthCatchAll, "zz@all.test": TruthCatchAll, "f@all.test": TruthFull,
		"a@nx.test": TruthNXDomain, "a@unknown.test": TruthNXDomain, "a@null.test": TruthNullMX,
		"a@noaddr.test": TruthNoAddress, "a@implicit.test": TruthDeliverable, "b@implicit.test": TruthMissing,
		"a@pol.test": TruthPolicy, "a@pd.test": TruthDeliverable,
		"nope": TruthInvalid, "@ok.test": TruthInvalid, "a@": TruthInvalid,
	} {
		if got := w.GroundTruth(addr); got != want {
			t.Errorf("GroundTruth(%q) = %q, want %q", addr, got, want)
		}
	}
	// The NullMX A record points at a refusing port.
	r := query(t, w, "udp", "null.test", dns.TypeA)
	addr := net.JoinHostPort(r.Answer[0].(*dns.A).A.String(), fmt.Sprint(w.SMTPPort()))
	if _, err := net.DialTimeout("tcp", addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("null MX sink: %v", err)
	}
	// The implicit MX host serves the domain.
	c := openSession(t, w, "implicit.test", "s@v.test")
	c.do(250, "", "RCPT TO:<a@implicit.test>")
}

func TestGenerate(t *testing.T) {
	d1, a1 := Generate(7, 2000, 100_000)
	d2, a2 := Generate(7, 2000, 100_000)
	if len(d1) != 2000 || len(a1) != 100_000 {
		t.Fatalf("sizes %d %d", len(d1), len(a1))
	}
	if fmt.Sprint(d1) != fmt.Sprint(d2) || strings.Join(a1, ",") != strings.Join(a2, ",") {
		t.Fatal("Generate is not deterministic")
	}
	if _, a3 := Generate(8, 2000, 1000); strings.Join(a3, ",") == strings.Join(a1[:1000], ",") {
		t.Fatal("seed ignored")
	}
	t0 := time.Now()
	w := start(t, d1, Options{})
	t.Logf("started %d domains, %d hosts in %v", len(d1), len(w.hosts), time.Since(t0))
	counts := map[string]int{}
	for _, a := range a1 {
		counts[w.GroundTruth(a)]++
	}
	t.Logf("truth mix: %v", counts)
	for _, k := range []string{TruthDeliverable, TruthMissing, TruthFull, TruthCatchAll, TruthNXDomain, TruthGreylisted, TruthPolicy} {
		if counts[k] == 0 {
			t.Errorf("no %s addresses", k)
		}
	}
	if counts[TruthDeliverable] < 30_000 {
		t.Errorf("too few deliverable: %d", counts[TruthDeliverable])
	}
	// Every SMTP-capable address resolves to a live host with the right answer.
	checked := 0
	for _, a := range a1[:300] {
		local, dom, _ := split(a)
		truth := w.UnderlyingTruth(a)
		if truth != TruthDeliverable && truth != TruthMissing && truth != TruthFull {
			continue
		}
		ds := w.domains[dom]
		if ds.group.tmpl.SecondRCPT452 || ds.group.tmpl.MaxConns > 0 || ds.Greylist > 0 {
			continue
		}
		addrs := w.MXAddrs(dom)
		c := dial(t, addrs[len(addrs)-1])
		c.expect(220, "")
		c.do(250, "", "EHLO v.test")
		c.do(250, "", "MAIL FROM:<>")
		want := map[string]int{TruthDeliverable: 250, TruthMissing: 550, TruthFull: 552}[truth]
		c.do(want, "", "RCPT TO:<%s@%s>", local, dom)
		c.do(221, "", "QUIT")
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d checked", checked)
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Start(ctx, []Domain{{Name: "a.test", MXHosts: 2}, {Name: "t.test", Tarpit: true}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for _, a := range append(w.MXAddrs("a.test"), w.MXAddrs("t.test")...) {
		nc, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	waitFor(t, func() bool { return w.Stats().Current == 3 })
	cancel() // ctx cancellation closes the world
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before+1 })
	for _, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, nc) // server side closed: EOF, not a timeout
		nc.Close()
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", w.MXAddrs("a.test")[0], time.Second); err == nil {
		t.Fatal("listener still open")
	}
}

func BenchmarkSMTPSession(b *testing.B) {
	w := start(b, []Domain{{Name: "b.test", Mailboxes: map[string]Behaviour{"a": Exists}}}, Options{})
	addr := w.MXAddrs("b.test")[0]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c := dial(b, addr)
		c.expect(220, "")
		c.do(250, "", "EHLO v.test")
		c.do(250, "", "MAIL FROM:<>")
		c.do(250, "", "RCPT TO:<a@b.test>")
		c.do(221, "", "QUIT")
		c.nc.Close()
	}
}

// RcptLimit: 452 4.5.3 after N RCPTs in one connection, whatever the
// transactions; Latency per domain; EqualPrefs in DNS.
func TestRcptLimitLatencyEqualPrefs(t *testing.T) {
	w := start(t, []Domain{
		{Name: "lim.test", RcptLimit: 2, Mailboxes: map[string]Behaviour{"a": Exists}},
		{Name: "far.test", Latency: 60 * time.Millisecond, MXHosts: 3, EqualPrefs: true},
	}, Options{})
	c := openSession(t, w, "lim.test", "s@v.test")
	c.do(250, "2.1.5", "RCPT TO:<a@lim.test>")
	c.do(250, "", "RSET")
	c.do(250, "", "MAIL FROM:<s@v.test>")
	c.do(550, "5.1.1", "RCPT TO:<b@lim.test>")
	c.do(250, "", "RSET")
	c.do(250, "", "MAIL FROM:<s@v.test>")
	c.do(452, "4.5.3", "RCPT TO:<a@lim.test>")
	c2 := openSession(t, w, "lim.test", "s@v.test") // a new connection starts afresh
	c2.do(250, "2.1.5", "RCPT TO:<a@lim.test>")

	t0 := time.Now()
	f := dial(t, w.MXAddrs("far.test")[0])
	f.expect(220, "")
	f.do(250, "", "NOOP")
	if d := time.Since(t0); d < 120*time.Millisecond {
		t.Fatalf("two replies at 60ms took %v", d)
	}
	m := query(t, w, "udp", "far.test.", dns.TypeMX)
	if len(m.Answer) != 3 {
		t.Fatalf("MX %v", m.Answer)
	}
	for _, rr := range m.Answer {
		if rr.(*dns.MX).Preference != 10 {
			t.Fatalf("MX %v: want all at preference 10", m.Answer)
		}
	}
	if err := func() error {
		_, err := Start(context.Background(), []Domain{
			{Name: "a.test", Provider: "p.test", RcptLimit: 5}, {Name: "b.test", Provider: "p.test"},
		}, Options{})
		return err
	}(); err == nil {
		t.Fatal("a provider's domains disagreeing on RcptLimit accepted")
	}
}

// GenerateWith: deterministic, with the profile's shares, and RowTruth
// knows every decorated row.
func TestGenerateWith(t *testing.T) {
	p := RealisticProfile()
	d1, a1 := GenerateWith(3, 1000, 20_000, p)
	d2, a2 := GenerateWith(3, 1000, 20_000, p)
	if fmt.Sprint(d1) != fmt.Sprint(d2) || strings.Join(a1, ",") != strings.Join(a2, ",") {
		t.Fatal("GenerateWith is not deterministic")
	}
	kinds := map[string]int{}
	for _, d := range d1 {
		switch {
		case d.Greylist == time.Minute:
			kinds["greylist"]++
		case d.Tarpit:
			kinds["tarpit"]++
		case d.PrimaryDown:
			kinds["primarydown"]++
		case d.RcptLimit > 0:
			kinds["rcptlimit"]++
		}
		if d.Greylist > 0 && d.Greylist != time.Minute {
			t.Fatalf("%s greylists for %v", d.Name, d.Greylist)
		}
	}
	postfix := 0
	for _, d := range d1 {
		if d.SoftErrors > 0 {
			postfix++
			if d.Tarpit || d.NXDomain || strings.HasPrefix(d.Name, "freemail") {
				t.Fatalf("%s: Postfix limits on a domain without working hosts or at a freemail provider", d.Name)
			}
		}
	}
	if postfix < 200 || postfix > 400 {
		t.Errorf("%d of 1000 domains with Postfix's error limits, want about a third", postfix)
	}
	if g := kinds["greylist"]; g < 80 || g > 130 || kinds["tarpit"] == 0 || kinds["primarydown"] < 10 || kinds["rcptlimit"] < 20 {
		t.Fatalf("domain kinds %v", kinds)
	}
	w := start(t, d1, Options{})
	truths := map[string]int{}
	padded := 0
	for _, a := range a1 {
		tr, under := w.RowTruth(a)
		truths[tr]++
		if tr != TruthGreylisted && tr != under {
			t.Fatalf("%q: truth %s, underlying %s", a, tr, under)
		}
		if strings.TrimSpace(a) != a || strings.Contains(a, "\u00a0") || strings.Contains(a, "\u3000") {
			if tr != TruthInvalid {
				padded++
			}
		}
	}
	t.Logf("truths %v, %d padded", truths, padded)
	for _, k := range []string{TruthDisposable, TruthTypo, TruthInvalid, TruthGreylisted, TruthTimeout, TruthDeliverable} {
		if truths[k] < 20 {
			t.Errorf("only %d rows of %s", truths[k], k)
		}
	}
	if padded < 400 {
		t.Errorf("%d padded rows", padded)
	}
	for _, d := range d1 {
		if d.InFlowDelay != 0 || d.ConnRateLimit != 0 || d.NonmailLimit != 0 || d.TarpitHangup != 0 {
			t.Fatalf("%s: pushback without Profile.Pushback", d.Name)
		}
	}

	// With pushback: nothing else changes, and each kind is there.
	p.Pushback = RealisticPushback()
	d3, a3 := GenerateWith(3, 1000, 20_000, p)
	if strings.Join(a1, ",") != strings.Join(a3, ",") {
		t.Fatal("pushback changed the list")
	}
	pk := map[string]int{}
	for i, d := range d3 {
		base := d
		base.InFlowDelay, base.ConnRateLimit, base.ConnRateWindow, base.NonmailLimit, base.TarpitHangup = 0, 0, 0, 0, 0
		if fmt.Sprint(base) != fmt.Sprint(d1[i]) {
			t.Fatalf("%s: pushback changed more than pushback", d.Name)
		}
		switch {
		case d.InFlowDelay > 0:
			pk["flow"]++
		}
		if d.ConnRateLimit > 0 {
			pk["anvil"]++
		}
		if d.NonmailLimit > 0 {
			pk["exim"]++
		}
		if d.Tarpit && d.TarpitHangup > 0 {
			pk["hangup"]++
		}
	}
	if pk["flow"] < 200 || pk["anvil"] < 50 || pk["exim"] < 50 || pk["hangup"] == 0 {
		t.Fatalf("pushback kinds %v", pk)
	}
	t.Logf("pushback kinds %v", pk)
	start(t, d3, Options{}) // a valid world: providers agree on their hosts

	// Karma's reputation alone: only those fields change, on ordinary
	// hosts without Postfix's error limits, none of them an Exim one.
	p.Pushback = KarmaReputation()
	d4, a4 := GenerateWith(3, 1000, 20_000, p)
	if strings.Join(a1, ",") != strings.Join(a4, ",") {
		t.Fatal("reputation changed the list")
	}
	karma := 0
	for i, d := range d4 {
		base := d
		base.ReputationDelay, base.ReputationAfter, base.ClientConns = 0, 0, 0
		if fmt.Sprint(base) != fmt.Sprint(d1[i]) {
			t.Fatalf("%s: reputation changed more than reputation", d.Name)
		}
		if d.ReputationDelay == 0 {
			continue
		}
		karma++
		if d.ReputationDelay != time.Second || d.ReputationAfter != 2 || d.ClientConns != 2 || d.SoftErrors > 0 || d.Provider != "" || d.Tarpit {
			t.Fatalf("%s: reputation %v after %d on a host it does not belong to: %+v", d.Name, d.ReputationDelay, d.ReputationAfter, d)
		}
	}
	if karma < 50 {
		t.Fatalf("%d reputation hosts", karma)
	}
	if tr, _ := w.RowTruth(" \u00a0" + "x@gmial.com\t"); tr != TruthTypo {
		t.Errorf("padded typo: %s", tr)
	}
}

// TestErrorLimits: a Postfix-like host counts every 4xx/5xx reply, RSET
// does not reset the count, replies slow down from SoftErrors on and the
// session closes with 421 at HardErrors.
func TestErrorLimits(t *testing.T) {
	const sleep = 50 * time.Millisecond
	w := start(t, []Domain{{Name: "pf.test", SoftErrors: 3, HardErrors: 5, ErrorSleep: sleep,
		Mailboxes: map[string]Behaviour{"ann": Exists}}}, Options{})
	c := dial(t, w.MXAddrs("pf.test")[0])
	c.expect(220, "ESMTP Postfix")
	c.do(250, "", "EHLO client.test")
	c.do(250, "", "MAIL FROM:<a@client.test>")
	for i := 0; i < 3; i++ { // three errors, answered at once
		start := time.Now()
		c.do(550, "", "RCPT TO:<nobody%d@pf.test>", i)
		if d := time.Since(start); d >= sleep {
			t.Fatalf("error %d answered after %v, before the soft limit", i+1, d)
		}
		c.do(250, "", "RSET")
		c.do(250, "", "MAIL FROM:<a@client.test>")
	}
	start := time.Now()
	c.do(250, "", "RCPT TO:<ann@pf.test>") // slowed even though it succeeds
	c.do(550, "", "RCPT TO:<nobody@pf.test>")
	c.do(550, "", "RCPT TO:<nobody2@pf.test>")
	if d := time.Since(start); d < 3*sleep {
		t.Fatalf("three replies after the soft limit took %v, want at least %v", d, 3*sleep)
	}
	c.send("RSET")
	c.expect(421, "too many errors")
	st := w.Stats().Hosts["mx1.pf.test"]
	if st.TooManyErrors != 1 || st.Slowed < 3 {
		t.Fatalf("stats %+v, want one session closed at the hard limit and at least 3 slowed replies", st)
	}
}

// Postfix's anvil: a client's connections counted in fixed windows; the
// one over the limit gets "421 4.7.0 <host> Error: too many connections
// from <ip>" at the greeting, and a new window starts at the first
// connection after the last ended.
func TestConnRateLimit(t *testing.T) {
	const window = time.Second
	w := start(t, []Domain{{Name: "anvil.test", ConnRateLimit: 3, ConnRateWindow: window}}, Options{})
	addr := w.MXAddrs("anvil.test")[0]
	t0 := time.Now()
	for range 3 {
		c := dial(t, addr)
		c.expect(220, "mx1.anvil.test")
		c.do(221, "", "QUIT")
	}
	c := dial(t, addr)
	c.expect(421, "4.7.0 mx1.anvil.test Error: too many connections from 127.0.0.1")
	if _, _, err := c.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the 421: %v", err)
	}
	time.Sleep(time.Until(t0.Add(window + 20*time.Millisecond)))
	dial(t, addr).expect(220, "")
	hs := w.Stats().Hosts["mx1.anvil.test"]
	if hs.Rejected != 1 || hs.Sent421 != 1 || hs.Total != 5 {
		t.Fatalf("stats %+v", hs)
	}
}

// Postfix's smtpd_recipient_limit (452 4.5.3, not an error of the session)
// and in_flow_delay (before the first accepted RCPT of each transaction).
func TestTxRcptLimitAndFlowDelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	w := start(t, []Domain{{Name: "pf.test", TxRcptLimit: 2, InFlowDelay: delay, SoftErrors: 1, HardErrors: 5, ErrorSleep: time.Second,
		Mailboxes: map[string]Behaviour{"ann": Exists, "bob": Exists}}}, Options{})
	c := openSession(t, w, "pf.test", "s@v.test")
	timed := func(code int, rcpt string) time.Duration {
		t.Helper()
		t0 := time.Now()
		c.do(code, "", "RCPT TO:<%s@pf.test>", rcpt)
		return time.Since(t0)
	}
	if d := timed(250, "ann"); d < delay {
		t.Fatalf("first accepted RCPT after %v, want the flow delay %v", d, delay)
	}
	if d := timed(250, "bob"); d >= delay {
		t.Fatalf("second accepted RCPT after %v: one queue file a transaction", d)
	}
	for range 3 { // over the limit: 452, and no error counted (no error sleep)
		if d := timed(452, "ann"); d >= delay {
			t.Fatalf("452 after %v", d)
		}
	}
	c.do(250, "", "RSET")
	c.do(250, "", "MAIL FROM:<s@v.test>")
	if d := timed(550, "nobody"); d >= delay {
		t.Fatalf("rejected RCPT after %v: no queue file, no flow delay", d)
	}
	if d := timed(250, "bob"); d < delay+time.Second {
		t.Fatalf("first accepted RCPT of the second transaction after %v, want the flow delay and the error sleep", d)
	}
	hs := w.Stats().Hosts["mx1.pf.test"]
	if hs.FlowDelays != 2 || hs.Slowed != 1 {
		t.Fatalf("stats %+v: want 2 flow delays, 1 slowed reply", hs)
	}
}

// Exim's smtp_accept_max_nonmail: one RSET and one EHLO a message are
// free, every other non-mail command counts, and the one over the limit
// gets "554 Too many nonmail commands" and a hang-up.
func TestNonmailLimit(t *testing.T) {
	w := start(t, []Domain{{Name: "exim.test", NonmailLimit: 3}}, Options{})
	c := dial(t, w.MXAddrs("exim.test")[0])
	c.expect(220, "ESMTP Exim 4.96")
	c.do(250, "", "EHLO v.test") // free
	c.do(250, "", "MAIL FROM:<s@v.test>")
	c.do(250, "", "RSET") // free
	c.do(250, "", "RSET") // 1
	c.do(250, "", "NOOP") // 2
	c.do(250, "", "MAIL FROM:<s@v.test>")
	c.do(250, "", "RSET") // 3
	c.send("RSET")        // 4: over
	c.expect(554, "Too many nonmail commands")
	if _, _, err := c.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the 554: %v", err)
	}
	if hs := w.Stats().Hosts["mx1.exim.test"]; hs.NonmailDrops != 1 || hs.RSET != 3 {
		t.Fatalf("stats %+v", hs)
	}
}

// A tarpit with TarpitHangup closes the connection then, without a word.
func TestTarpitHangup(t *testing.T) {
	const hangup = 150 * time.Millisecond
	w := start(t, []Domain{{Name: "pit.test", Tarpit: true, TarpitHangup: hangup}}, Options{})
	nc, err := net.Dial("tcp", w.MXAddrs("pit.test")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	t0 := time.Now()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := nc.Read(make([]byte, 64))
	if d := time.Since(t0); n != 0 || !errors.Is(err, io.EOF) || d < hangup*9/10 || d > hangup+time.Second {
		t.Fatalf("read n=%d err=%v after %v, want EOF after %v", n, err, d, hangup)
	}
	if got := w.GroundTruth("a@pit.test"); got != TruthTimeout {
		t.Fatalf("truth %q", got)
	}
}

// Profile.SharedMX hosts every domain with MX hosts on that many provider
// hosts, and the world starts (its providers agree on their hosts).
func TestGenerateSharedMX(t *testing.T) {
	for _, n := range []int{1, 20} {
		p := RealisticProfile()
		p.SharedMX = n
		doms, _ := GenerateWith(3, 300, 2000, p)
		providers := map[string]int{}
		for _, d := range doms {
			hosted := !(d.NXDomain || d.NullMX || d.NoAddress || d.NoMX)
			if hosted != (d.Provider != "") || (hosted && d.MXHosts != 1) {
				t.Fatalf("%s: provider %q, %d MX hosts", d.Name, d.Provider, d.MXHosts)
			}
			if hosted {
				providers[d.Provider]++
			}
		}
		if len(providers) != n {
			t.Errorf("SharedMX %d: %d providers", n, len(providers))
		}
		start(t, doms, Options{})
	}
}

// replyTime is how long c's command took to get its reply.
func replyTime(t *testing.T, c *client, code int, format string, args ...any) time.Duration {
	t.Helper()
	t0 := time.Now()
	c.do(code, "", format, args...)
	return time.Since(t0)
}

// A reputation host (Domain.ReputationDelay): once a client address has
// sent an unknown recipient, every later reply to that address waits the
// delay, in that session and the next; another client address is not
// slowed.
func TestReputationDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	w := start(t, []Domain{{Name: "rep.test", ReputationDelay: delay, Mailboxes: map[string]Behaviour{"ann": Exists}}}, Options{})
	a := openSession(t, w, "rep.test", "s@v.test")
	if d := replyTime(t, a, 250, "RCPT TO:<ann@rep.test>"); d >= delay {
		t.Fatalf("a good client's reply after %v", d)
	}
	if d := replyTime(t, a, 550, "RCPT TO:<nobody@rep.test>"); d >= delay {
		t.Fatalf("the unknown recipient's own reply after %v: not slowed for itself", d)
	}
	if d := replyTime(t, a, 250, "RCPT TO:<ann@rep.test>"); d < delay {
		t.Fatalf("after an unknown recipient, a reply after %v, want at least %v", d, delay)
	}
	again := dial(t, w.MXAddrs("rep.test")[0])
	again.expect(220, "")
	if d := replyTime(t, again, 250, "EHLO verifier.test"); d < delay {
		t.Fatalf("the same client's next session: EHLO after %v, want at least %v", d, delay)
	}
	// Another client address (a second egress) is not slowed.
	nc, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}).Dial("tcp", w.MXAddrs("rep.test")[0])
	if err != nil {
		t.Fatalf("dial from 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	b := &client{t: t, nc: nc, tp: textproto.NewConn(nc)}
	b.expect(220, "")
	if d := replyTime(t, b, 250, "EHLO verifier.test"); d >= delay {
		t.Fatalf("another client address slowed: EHLO after %v", d)
	}
	// Slowed: the first client's RCPT after the unknown one, and its
	// next session's greeting and EHLO.
	if hs := w.Stats().Hosts["mx1.rep.test"]; hs.Slowed != 3 || hs.Unknowns["127.0.0.1"] != 1 || len(hs.Unknowns) != 1 {
		t.Fatalf("stats %+v: want 3 slowed replies, one unknown recipient from 127.0.0.1", hs)
	}
}

// With ReputationAfter, a client address is bad only from its nth unknown
// recipient on, whatever the sessions they came in.
func TestReputationAfter(t *testing.T) {
	const delay = 300 * time.Millisecond
	w := start(t, []Domain{{Name: "rep.test", ReputationDelay: delay, ReputationAfter: 2}}, Options{})
	a := openSession(t, w, "rep.test", "s@v.test")
	if d := replyTime(t, a, 550, "RCPT TO:<no1@rep.test>"); d >= delay {
		t.Fatalf("the first unknown recipient's reply after %v", d)
	}
	b := openSession(t, w, "rep.test", "s@v.test")
	for i, slow := range []bool{false, true} {
		if d := replyTime(t, b, 550, "RCPT TO:<no%d@rep.test>", i+2); (d >= delay) != slow {
			t.Fatalf("unknown recipient %d (the session's %d) answered after %v: slowed %v, want %v", i+2, i+1, d, !slow, slow)
		}
	}
	if hs := w.Stats().Hosts["mx1.rep.test"]; hs.Unknowns["127.0.0.1"] != 3 || hs.Slowed != 1 {
		t.Fatalf("stats %+v: want 3 unknown recipients and 1 slowed reply", hs)
	}
}

// TestClientConns: a client address holds ClientConns connections at
// once; the next from it is refused at the greeting, one from another
// address is not, and a closed one frees its place.
func TestClientConns(t *testing.T) {
	w := start(t, []Domain{{Name: "karma.test", ClientConns: 2}}, Options{})
	addr := w.MXAddrs("karma.test")[0]
	from := func(ip string) *client {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", addr, ip, err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		t.Cleanup(func() { nc.Close() })
		return &client{t: t, nc: nc, tp: textproto.NewConn(nc)}
	}
	a, b := from("127.0.0.1"), from("127.0.0.1")
	a.expect(220, "")
	b.expect(220, "")
	from("127.0.0.1").expect(421, "too many connections from 127.0.0.1")
	from("127.0.0.2").expect(220, "")
	a.do(221, "", "QUIT")
	a.nc.Close()
	// The server lets a's place go once it has seen the close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := from("127.0.0.1")
		code, _, err := c.read()
		if code == 220 {
			break
		}
		if code != 421 || time.Now().After(deadline) {
			t.Fatalf("after a close: %d, %v", code, err)
		}
	}
	if hs := w.Stats().Hosts["mx1.karma.test"]; hs.Rejected < 1 {
		t.Fatalf("stats %+v: want the refusal counted", hs)
	}
}
