package realmta

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/textproto"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// kitWorld has one host of each kind and one domain of each shape.
func kitWorld() World {
	return World{
		Hosts: []Host{
			{Name: "mx.plain.test", Software: Postfix},
			{Name: "mx.grey.test", Software: Postfix, Greylist: true},
			{Name: "mx.anvil.test", Software: Postfix, ConnRateLimit: 3},
			{Name: "mx.busy.test", Software: Postfix, ConnCountLimit: 1},
			{Name: "mx.screen.test", Software: Postfix, Postscreen: true},
			{Name: "mx.few.test", Software: Postfix, RecipientLimit: 2},
			// Postfix's error limits, scaled down so the test takes
			// seconds (the defaults are 10, 20, 1s and 100).
			{Name: "mx.strict.test", Software: Postfix, Postfix: map[string]string{
				"smtpd_soft_error_limit": "2", "smtpd_hard_error_limit": "4", "smtpd_junk_command_limit": "3"}},
			{Name: "mx.exim.test", Software: Exim},
			{Name: "mx.tarpit.test", Software: Postfix, Tarpit: tarpitFor},
			{Name: "mx.hangup.test", Software: Postfix, HangUp: hangUpAt},
			{Name: "mx.down.test", Software: Down},
		},
		Domains: []Domain{
			{Name: "plain.test", Host: "mx.plain.test", Mailboxes: []string{"alice", "bob"}, Full: []string{"carol"}},
			{Name: "catchall.test", Host: "mx.plain.test", CatchAll: true},
			{Name: "policy.test", Host: "mx.plain.test", Mailboxes: []string{"alice"}, Full: []string{"bob"}, Policy: true},
			{Name: "aonly.test", Shape: ShapeAOnly, Host: "mx.plain.test", Mailboxes: []string{"alice"}},
			{Name: "grey.test", Host: "mx.grey.test", Mailboxes: []string{"alice", "bob"}},
			{Name: "anvil.test", Host: "mx.anvil.test", Mailboxes: []string{"alice"}},
			{Name: "busy.test", Host: "mx.busy.test", Mailboxes: []string{"alice"}},
			{Name: "screen.test", Host: "mx.screen.test", Mailboxes: []string{"alice"}},
			{Name: "few.test", Host: "mx.few.test", Mailboxes: []string{"a", "b", "c"}},
			{Name: "strict.test", Host: "mx.strict.test", Mailboxes: []string{"alice"}},
			{Name: "exim.test", Host: "mx.exim.test", Mailboxes: []string{"carol", "dave"}},
			{Name: "eximall.test", Host: "mx.exim.test", CatchAll: true},
			{Name: "nullmx.test", Shape: ShapeNullMX},
			{Name: "nomail.test", Shape: ShapeNoAddress},
			{Name: "gone.test", Shape: ShapeNXDomain},
			{Name: "tarpit.test", Host: "mx.tarpit.test", Mailboxes: []string{"alice"}},
			{Name: "hangup.test", Host: "mx.hangup.test", Mailboxes: []string{"alice"}},
			{Name: "down.test", Host: "mx.down.test", Mailboxes: []string{"alice"}},
		},
	}
}

const (
	greetWait = 2 * time.Second
	tarpitFor = 3 * time.Second // mx.tarpit's silence before its greeting
	hangUpAt  = 4 * time.Second // mx.hangup closes without a byte
	rcptMax   = 5               // Exim's recipients_max in the kit world
)

// TestRealMTAs starts real Postfix, postgrey, Exim and NSD and checks that
// each listener behaves as its configuration says, with a plain SMTP
// client.
func TestRealMTAs(t *testing.T) {
	t.Parallel()
	r := StartT(t, kitWorld(), Options{GreylistDelay: 2 * time.Second, PostscreenGreetWait: greetWait,
		EximMain: map[string]string{"recipients_max": fmt.Sprint(rcptMax)}})
	addr := r.HostAddr

	t.Run("dns", func(t *testing.T) {
		q := func(name string, qt uint16) *dns.Msg {
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(name), qt)
			in, err := dns.Exchange(m, r.DNSAddr())
			if err != nil {
				t.Fatalf("%s %s: %v", name, dns.TypeToString[qt], err)
			}
			return in
		}
		if in := q("plain.test", dns.TypeMX); len(in.Answer) != 1 || in.Answer[0].(*dns.MX).Mx != "mx.plain.test." {
			t.Errorf("MX plain.test: %v", in.Answer)
		}
		host, _, _ := net.SplitHostPort(addr("mx.plain.test"))
		if in := q("mx.plain.test", dns.TypeA); len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != host {
			t.Errorf("A mx.plain.test: %v, want %s", in.Answer, host)
		}
		if in := q("aonly.test", dns.TypeMX); in.Rcode != dns.RcodeSuccess || len(in.Answer) != 0 {
			t.Errorf("MX aonly.test: %s %v, want NOERROR, no answer", dns.RcodeToString[in.Rcode], in.Answer)
		}
		if in := q("aonly.test", dns.TypeA); len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != host {
			t.Errorf("A aonly.test: %v", in.Answer)
		}
		if in := q("nullmx.test", dns.TypeMX); len(in.Answer) != 1 || in.Answer[0].(*dns.MX).Mx != "." || in.Answer[0].(*dns.MX).Preference != 0 {
			t.Errorf("MX nullmx.test: %v", in.Answer)
		}
		if in := q("gone.test", dns.TypeMX); in.Rcode != dns.RcodeNameError {
			t.Errorf("MX gone.test: %s, want NXDOMAIN", dns.RcodeToString[in.Rcode])
		}
		for _, qt := range []uint16{dns.TypeMX, dns.TypeA} {
			if in := q("nomail.test", qt); in.Rcode != dns.RcodeSuccess || len(in.Answer) != 0 || len(in.Ns) == 0 {
				t.Errorf("%s nomail.test: %s %v, want NOERROR, no answer, SOA", dns.TypeToString[qt], dns.RcodeToString[in.Rcode], in.Answer)
			}
		}
		if in := q("outside.example", dns.TypeMX); in.Rcode != dns.RcodeRefused {
			t.Errorf("MX outside.example: %s, want REFUSED (not our zone)", dns.RcodeToString[in.Rcode])
		}
	})

	t.Run("postfix-mailboxes", func(t *testing.T) {
		c, g := dial(t, addr("mx.plain.test"), "")
		if g.code != 220 || !strings.Contains(g.msg, "mx.plain.test ESMTP Postfix") {
			t.Fatalf("greeting %q", g)
		}
		c.expect("EHLO client.test", "250")
		c.expect("MAIL FROM:<probe@client.test>", "250 2.1.0")
		c.expect("RCPT TO:<alice@plain.test>", "250 2.1.5")
		c.expect("RCPT TO:<ALICE@Plain.Test>", "250 2.1.5")
		c.expect("RCPT TO:<nobody@plain.test>", "550 5.1.1")
		c.expect("RCPT TO:<carol@plain.test>", "552 5.2.2")
		c.expect("RCPT TO:<anything@catchall.test>", "250 2.1.5")
		c.expect("RCPT TO:<alice@policy.test>", "550 5.7.1")
		c.expect("RCPT TO:<bob@policy.test>", "552 5.2.2") // user@domain is looked up first
		c.expect("RCPT TO:<alice@aonly.test>", "250 2.1.5")
		c.expect("RCPT TO:<someone@outside.example>", "554 5.7.1") // relay refused
		c.expect("DATA", "554")                                    // nothing is ever queued
		c.expect("RSET", "250")
		c.expect("QUIT", "221")
	})

	t.Run("anvil-rate", func(t *testing.T) {
		for i := 1; i <= 4; i++ {
			c, g := dial(t, addr("mx.anvil.test"), "127.0.0.31")
			want := 220
			if i == 4 {
				want = 421
			}
			if g.code != want {
				t.Fatalf("connection %d: greeting %q, want %d", i, g, want)
			}
			if i == 4 && !strings.Contains(g.msg, "too many connections from 127.0.0.31") {
				t.Errorf("connection %d: %q", i, g)
			}
			c.close()
		}
		// Another client has its own count.
		if _, g := dial(t, addr("mx.anvil.test"), "127.0.0.32"); g.code != 220 {
			t.Errorf("other client: %q", g)
		}
	})

	t.Run("anvil-concurrency", func(t *testing.T) {
		first, g := dial(t, addr("mx.busy.test"), "127.0.0.33")
		if g.code != 220 {
			t.Fatalf("first: %q", g)
		}
		if _, g := dial(t, addr("mx.busy.test"), "127.0.0.33"); g.code != 421 {
			t.Errorf("second at once: %q, want 421", g)
		}
		first.expect("QUIT", "221")
		first.close()
		var g2 reply
		for range 50 { // anvil hears of the disconnect a moment later
			var c *client
			c, g2 = dial(t, addr("mx.busy.test"), "127.0.0.33")
			c.close()
			if g2.code == 220 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if g2.code != 220 {
			t.Errorf("after the first closed: %q", g2)
		}
	})

	t.Run("recipient-limit", func(t *testing.T) {
		c, _ := dial(t, addr("mx.few.test"), "")
		c.expect("EHLO client.test", "250")
		c.expect("MAIL FROM:<probe@client.test>", "250")
		c.expect("RCPT TO:<a@few.test>", "250")
		c.expect("RCPT TO:<b@few.test>", "250")
		c.expect("RCPT TO:<c@few.test>", "452 4.5.3")
		c.expect("RSET", "250")
		c.expect("MAIL FROM:<probe@client.test>", "250")
		c.expect("RCPT TO:<c@few.test>", "250") // per transaction
	})

	t.Run("exim", func(t *testing.T) {
		c, g := dial(t, addr("mx.exim.test"), "")
		if g.code != 220 || !strings.Contains(g.msg, "mx.exim.test ESMTP Exim") {
			t.Fatalf("greeting %q", g)
		}
		c.expect("EHLO client.test", "250")
		c.expect("MAIL FROM:<probe@client.test>", "250")
		c.expect("RCPT TO:<carol@exim.test>", "250")
		c.expect("RCPT TO:<Dave@Exim.Test>", "250")
		c.expect("RCPT TO:<nobody@exim.test>", "550 Unrouteable address")
		c.expect("RCPT TO:<whoever@eximall.test>", "250")
		c.expect("RCPT TO:<someone@outside.example>", "550")
		c.expect("DATA", "550")
		c.expect("QUIT", "221")

		// smtp_accept_max_nonmail (10): RSETs between transactions count
		// (Exim lets the session's first EHLO and first RSET through
		// uncounted), and the session is dropped with a 554.
		c, _ = dial(t, addr("mx.exim.test"), "")
		c.expect("EHLO client.test", "250")
		rsets := 0
		var last reply
		for range 30 {
			c.expect("MAIL FROM:<probe@client.test>", "250")
			c.expect("RCPT TO:<carol@exim.test>", "250")
			if last = c.cmd("RSET"); last.code != 250 {
				break
			}
			rsets++
		}
		if last.code != 554 || !strings.Contains(last.msg, "Too many nonmail commands") {
			t.Errorf("after %d RSETs: %q, want 554 Too many nonmail commands", rsets, last)
		}
		if rsets != 11 {
			t.Errorf("%d RSETs accepted, want 11 (1 free, 10 counted)", rsets)
		}
		if rp := c.cmd("NOOP"); rp.err == nil {
			t.Errorf("session still open after the 554: %q", rp)
		}

		// recipients_max (Options.EximMain): past it, 452 for each RCPT of
		// the message, rejected ones counted too.
		c, _ = dial(t, addr("mx.exim.test"), "")
		c.expect("EHLO client.test", "250")
		c.expect("MAIL FROM:<probe@client.test>", "250")
		c.expect("RCPT TO:<nobody@exim.test>", "550")
		for range rcptMax - 1 {
			c.expect("RCPT TO:<carol@exim.test>", "250")
		}
		c.expect("RCPT TO:<dave@exim.test>", "452 too many recipients")
		c.expect("QUIT", "221")
	})

	t.Run("down", func(t *testing.T) {
		_, err := net.DialTimeout("tcp", addr("mx.down.test"), time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial mx.down.test: %v, want connection refused", err)
		}
	})

	// The slow ones (they wait out delays) run side by side.
	t.Run("timed", func(t *testing.T) {
		t.Run("greylisting", func(t *testing.T) {
			t.Parallel()
			c, _ := dial(t, addr("mx.grey.test"), "")
			c.expect("EHLO client.test", "250")
			c.expect("MAIL FROM:<probe@client.test>", "250")
			c.expect("RCPT TO:<alice@grey.test>", "450 4.2.0")
			c.expect("RCPT TO:<nobody@grey.test>", "550 5.1.1") // unknown users are not greylisted
			c.expect("RCPT TO:<alice@grey.test>", "450 4.2.0")  // too early
			time.Sleep(2*time.Second + 300*time.Millisecond)
			c.expect("RCPT TO:<alice@grey.test>", "250 2.1.5")
			c.expect("RCPT TO:<bob@grey.test>", "450 4.2.0") // a new triplet waits its own delay
		})
		t.Run("tarpit", func(t *testing.T) {
			t.Parallel()
			// Accepted, then nothing until the sleep is over.
			_, g := dial(t, addr("mx.tarpit.test"), "")
			if g.code != 220 || g.took < tarpitFor-100*time.Millisecond || g.took > tarpitFor+2*time.Second {
				t.Errorf("greeting %q after %v, want a 220 after ~%v of silence", g, g.took, tarpitFor)
			}
		})
		t.Run("hangup", func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			nc, err := net.DialTimeout("tcp", addr("mx.hangup.test"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetReadDeadline(time.Now().Add(hangUpAt + 5*time.Second))
			b, err := readAll(nc)
			took := time.Since(start)
			if len(b) != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("read %q, %v: want the connection closed without a byte", b, err)
			}
			if took < hangUpAt-500*time.Millisecond || took > hangUpAt+time.Second {
				t.Errorf("closed after %v, want ~%v", took, hangUpAt)
			}
		})
		t.Run("postscreen", func(t *testing.T) {
			t.Parallel()
			c, g := dial(t, addr("mx.screen.test"), "127.0.0.34")
			if g.code != 220 || !strings.Contains(g.msg, "\n") || g.took < greetWait-200*time.Millisecond {
				t.Errorf("new client: greeting %q after %v, want a multi-line 220 after ~%v", g, g.took, greetWait)
			}
			c.expect("EHLO client.test", "250")
			c.expect("MAIL FROM:<probe@client.test>", "250")
			c.expect("RCPT TO:<alice@screen.test>", "250 2.1.5")
			c.expect("RCPT TO:<nobody@screen.test>", "550 5.1.1")
			c.close()
			if _, g := dial(t, addr("mx.screen.test"), "127.0.0.34"); g.code != 220 || g.took > time.Second {
				t.Errorf("known client: greeting %q after %v, want at once", g, g.took)
			}
			// A client that talks before the greeting fails the pregreet test;
			// with postscreen_greet_action = enforce postscreen's own SMTP
			// engine goes on talking and rejects its recipients.
			nc, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.35")}, net.TCPAddrFromAddrPort(mustAddrPort(t, addr("mx.screen.test"))))
			if err != nil {
				t.Fatal(err)
			}
			early := &client{t: t, nc: nc, tp: textproto.NewConn(nc)}
			defer early.close()
			if err := early.tp.PrintfLine("EHLO early.test"); err != nil {
				t.Fatal(err)
			}
			// The teaser line comes, but no final 220: postscreen's engine
			// answers the EHLO that came too early.
			_ = nc.SetReadDeadline(time.Now().Add(greetWait + 5*time.Second))
			if g, err := early.tp.ReadLine(); !strings.HasPrefix(g, "220-") {
				t.Fatalf("pregreet client: greeting %q %v", g, err)
			}
			if rp := early.read(); rp.code != 250 {
				t.Fatalf("pregreet client: EHLO %q", rp)
			}
			early.expect("MAIL FROM:<probe@client.test>", "250")
			early.expect("RCPT TO:<alice@screen.test>", "550 5.5.1")
		})
		t.Run("error-limits", func(t *testing.T) {
			t.Parallel()
			// soft 2, hard 4: the third error on waits smtpd_error_sleep_time
			// (1s) before its reply; the fifth is "421 too many errors".
			c, _ := dial(t, addr("mx.strict.test"), "127.0.0.36")
			c.expect("EHLO client.test", "250")
			c.expect("MAIL FROM:<probe@client.test>", "250")
			var got []string
			for i := 1; i <= 6; i++ {
				rp := c.cmd(fmt.Sprintf("RCPT TO:<nobody%d@strict.test>", i))
				got = append(got, fmt.Sprintf("%d:%s(%.1fs)", i, rp.String()[:3], rp.took.Seconds()))
				if rp.code == 421 {
					if !strings.Contains(rp.msg, "too many errors") || i != 5 {
						t.Errorf("closed at RCPT %d: %q", i, rp)
					}
					break
				}
				if rp.code != 550 {
					t.Fatalf("RCPT %d: %q", i, rp)
				}
				if slow := rp.took > 800*time.Millisecond; slow != (i >= 3) {
					t.Errorf("RCPT %d took %v (soft limit 2: slow from the 3rd error on)", i, rp.took)
				}
			}
			t.Logf("replies: %v", got)
			// RSETs past smtpd_junk_command_limit (3) count as errors too.
			c, _ = dial(t, addr("mx.strict.test"), "127.0.0.37")
			c.expect("EHLO client.test", "250")
			n := 0
			for ; n < 12; n++ {
				if rp := c.cmd("RSET"); rp.code != 250 {
					if rp.code != 421 || !strings.Contains(rp.msg, "too many errors") {
						t.Errorf("RSET %d: %q", n+1, rp)
					}
					break
				}
			}
			if n != 3+4 { // 3 free, then errors 1..4; the 8th is refused
				t.Errorf("%d RSETs answered 250 before 421, want 7", n)
			}
		})
		t.Run("flow-control", func(t *testing.T) {
			t.Parallel()
			// Every transaction with an accepted RCPT opens a queue file and
			// takes an in_flow_delay token; the queue manager refills the
			// pool (default_process_limit, 100) only when mail moves, and
			// probes never complete a message, so after the pool is spent
			// every new transaction waits in_flow_delay (1s) at its first
			// accepted RCPT. Sessions are kept short of
			// smtpd_junk_command_limit (100 RSETs).
			slowAt := 0
			var fast time.Duration
			for n := 0; n < 160 && slowAt == 0; {
				c, _ := dial(t, addr("mx.plain.test"), "127.0.0.38")
				c.expect("EHLO client.test", "250")
				for k := 0; k < 40 && slowAt == 0; k, n = k+1, n+1 {
					c.expect("MAIL FROM:<probe@client.test>", "250")
					rp := c.expect("RCPT TO:<alice@plain.test>", "250")
					if rp.took > 800*time.Millisecond {
						slowAt = n + 1
					} else {
						fast = max(fast, rp.took)
					}
					c.expect("RSET", "250")
				}
				c.close()
			}
			if slowAt == 0 || slowAt > 101 {
				t.Fatalf("no in_flow_delay pause within 160 transactions (slow at %d)", slowAt)
			}
			t.Logf("first paused transaction: #%d (earlier RCPTs at most %v)", slowAt, fast)
		})
	})

	t.Run("postfix-defaults-kept", func(t *testing.T) {
		// What the world does not set stays Postfix's default.
		params := []string{"smtpd_soft_error_limit", "smtpd_hard_error_limit", "smtpd_error_sleep_time", "smtpd_junk_command_limit",
			"in_flow_delay", "default_process_limit", "smtpd_recipient_limit", "smtpd_client_connection_count_limit",
			"smtpd_client_connection_rate_limit", "anvil_rate_time_unit"}
		out, err := exec.Command(r.bins.Postconf, append([]string{"-c", r.postfixConf, "-x", "-h"}, params...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(strings.Fields(string(out)), " ")
		if want := "10 20 1s 100 1s 100 1000 50 0 60s"; got != want {
			t.Errorf("effective settings %q, want Postfix's defaults %q", got, want)
		}
	})

	t.Run("counts", func(t *testing.T) {
		cs, err := r.SettledCounts(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		h := cs.Hosts
		checks := []struct {
			what      string
			got, want int
			atLeast   bool
		}{
			{"anvil rate refusals", h["mx.anvil.test"].AnvilRate, 1, false},
			{"anvil concurrency refusals", h["mx.busy.test"].AnvilCount, 1, false},
			{"too many errors", h["mx.strict.test"].TooManyErrors, 2, false},
			{"exim too many nonmail", h["mx.exim.test"].TooManyNonmail, 1, false},
			{"exim RCPTs", h["mx.exim.test"].RCPT, 5 + 12 + rcptMax, false},
			{"exim rejected RCPTs", h["mx.exim.test"].Rejects["550"], 3, false},
			{"exim sessions", h["mx.exim.test"].Sessions, 3, false},
			{"exim sessions ended", h["mx.exim.test"].Disconnects, 3, false},
			{"tarpit sessions", h["mx.tarpit.test"].Sessions, 1, false},
			{"hangup sessions", h["mx.hangup.test"].Sessions, 1, false},
			// (The command answered "421 too many errors" is not counted.)
			{"strict most rejected in a session", h["mx.strict.test"].MaxRejected, 4, false},
			{"strict most RSETs in a session", h["mx.strict.test"].MaxRSET, 7, false},
			{"postscreen new", h["mx.screen.test"].PostscreenPassNew, 1, false},
			{"postscreen old", h["mx.screen.test"].PostscreenPassOld, 1, true},
			{"pregreet", h["mx.screen.test"].Pregreet, 1, false},
			{"greylisted", h["mx.grey.test"].Greylisted, 3, false},
			{"postgrey greylist decisions", cs.PostgreyGreylist, 3, false},
			{"postgrey passes", cs.PostgreyPass, 1, false},
			{"plain RCPTs", h["mx.plain.test"].RCPT, 9, true},
			{"plain queue files", h["mx.plain.test"].QueueFiles, 90, true},
			{"plain 550", h["mx.plain.test"].Rejects["550"], 2, false},
			{"plain 552", h["mx.plain.test"].Rejects["552"], 2, false},
			{"sessions", cs.Total.Sessions, 15, true},
			{"sessions ended", cs.Total.Disconnects, cs.Total.Sessions - 1, false}, // the hang-up's smtpd died
		}
		for _, c := range checks {
			if c.got != c.want && !(c.atLeast && c.got > c.want) {
				t.Errorf("%s: %d, want %s%d", c.what, c.got, map[bool]string{true: ">= "}[c.atLeast], c.want)
			}
		}
		t.Logf("totals: %+v; postgrey greylist %d pass %d", cs.Total, cs.PostgreyGreylist, cs.PostgreyPass)
	})
}

func TestTruth(t *testing.T) {
	w := kitWorld()
	for _, c := range []struct{ addr, verdict, underlying, kind string }{
		{"alice@plain.test", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix"},
		{" Alice@PLAIN.test ", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix"},
		{"nobody@plain.test", mailworld.TruthMissing, mailworld.TruthMissing, "postfix"},
		{"carol@plain.test", mailworld.TruthFull, mailworld.TruthFull, "postfix"},
		{"x@catchall.test", mailworld.TruthCatchAll, mailworld.TruthCatchAll, "postfix"},
		{"alice@policy.test", mailworld.TruthPolicy, mailworld.TruthPolicy, "postfix"},
		{"bob@policy.test", mailworld.TruthFull, mailworld.TruthFull, "postfix"},
		{"alice@aonly.test", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix"},
		{"alice@grey.test", mailworld.TruthGreylisted, mailworld.TruthDeliverable, "postfix+postgrey"},
		{"nobody@grey.test", mailworld.TruthMissing, mailworld.TruthMissing, "postfix+postgrey"},
		{"alice@anvil.test", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix+anvil-rate"},
		{"alice@busy.test", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix+anvil-conns"},
		{"alice@screen.test", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix+postscreen"},
		{"c@few.test", mailworld.TruthDeliverable, mailworld.TruthDeliverable, "postfix+rcpt-limit"},
		{"nobody@exim.test", mailworld.TruthMissing, mailworld.TruthMissing, "exim"},
		{"x@eximall.test", mailworld.TruthCatchAll, mailworld.TruthCatchAll, "exim"},
		{"a@nullmx.test", mailworld.TruthNullMX, mailworld.TruthNullMX, ""},
		{"a@nomail.test", mailworld.TruthNoAddress, mailworld.TruthNoAddress, ""},
		{"a@gone.test", mailworld.TruthNXDomain, mailworld.TruthNXDomain, ""},
		{"a@undeclared.test", mailworld.TruthNXDomain, mailworld.TruthNXDomain, ""},
		{"not-an-address", mailworld.TruthInvalid, mailworld.TruthInvalid, ""},
		{"alice@tarpit.test", mailworld.TruthTimeout, mailworld.TruthTimeout, "postfix+tarpit"},
		{"alice@hangup.test", mailworld.TruthTimeout, mailworld.TruthTimeout, "postfix+hangup"},
		{"alice@down.test", mailworld.TruthTimeout, mailworld.TruthTimeout, "down"},
	} {
		got := w.Truth(c.addr)
		if got.Verdict != c.verdict || got.Underlying != c.underlying || got.Kind != c.kind {
			t.Errorf("Truth(%q) = %+v, want %s/%s on %q", c.addr, got, c.verdict, c.underlying, c.kind)
		}
	}
}

func TestValidate(t *testing.T) {
	base := kitWorld()
	for _, c := range []struct {
		name   string
		change func(w *World)
		want   string
	}{
		{"host outside zone", func(w *World) { w.Hosts[0].Name = "mx.example.com" }, "want a name under test"},
		{"unknown host", func(w *World) { w.Domains[0].Host = "mx.nowhere.test" }, "unknown host"},
		{"duplicate domain", func(w *World) { w.Domains = append(w.Domains, w.Domains[0]) }, "declared twice"},
		{"postfix knob on exim", func(w *World) { w.Hosts[7].Greylist = true }, "Postfix settings on an Exim host"},
		{"full on exim", func(w *World) { w.Domains[10].Full = []string{"x"} }, "Postfix-only"},
		{"mailbox on nxdomain", func(w *World) { w.Domains[14].Mailboxes = []string{"x"} }, "takes no host"},
		{"bad local part", func(w *World) { w.Domains[0].Mailboxes = []string{"Al ice"} }, "local part"},
		{"option with space", func(w *World) { w.Hosts[0].Postfix = map[string]string{"x": "a b"} }, "white space"},
		{"hang-up off the watchdog's steps", func(w *World) { w.Hosts[9].HangUp = 5 * time.Second }, "3k+1 seconds"},
		{"tarpit on exim", func(w *World) { w.Hosts[7].Tarpit = time.Second }, "Postfix settings on an Exim host"},
		{"tarpit and postscreen", func(w *World) { w.Hosts[4].Tarpit = time.Second }, "exclusive"},
	} {
		w := kitWorld()
		w.Hosts = append([]Host(nil), base.Hosts...)
		w.Domains = append([]Domain(nil), base.Domains...)
		c.change(&w)
		err := w.validate("test")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := base.validate("test"); err != nil {
		t.Errorf("kit world: %v", err)
	}
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func readAll(c net.Conn) ([]byte, error) {
	var b []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			return b, err
		}
	}
}
