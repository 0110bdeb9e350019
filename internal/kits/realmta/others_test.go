package realmta

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSendmailHaraka starts a real sendmail and a real Haraka with their
// anti-harvest settings and checks, with a plain SMTP client, that each
// behaves as its configuration says and that Counts reads it from their
// logs.
func TestSendmailHaraka(t *testing.T) {
	t.Parallel()
	w := World{
		Hosts: []Host{
			{Name: "mx.sendmail.test", Software: Sendmail, RecipientLimit: 5, BadRcptThrottle: 2, ConnRateLimit: 3},
			{Name: "mx.sendmail2.test", Software: Sendmail, ConnCountLimit: 1},
			{Name: "mx.haraka.test", Software: Haraka, Karma: true, RecipientLimit: 8, ConnCountLimit: 1},
		},
		Domains: []Domain{
			{Name: "sm.test", Host: "mx.sendmail.test", Mailboxes: []string{"alice", "bob"}},
			{Name: "small.test", Host: "mx.sendmail.test", CatchAll: true},
			{Name: "sm2.test", Host: "mx.sendmail2.test", Mailboxes: []string{"alice"}},
			{Name: "hk.test", Host: "mx.haraka.test", Mailboxes: []string{"alice", "bob"}},
			{Name: "hkall.test", Host: "mx.haraka.test", CatchAll: true},
		},
	}
	// 12s: sendmail's rate window is a multiple of 6s (Host.ConnRateWindow).
	r := StartT(t, w, Options{AnvilRateTimeUnit: 12 * time.Second})
	src := r.opt.addr(0, 40).String()

	t.Run("sendmail", func(t *testing.T) {
		c, g := dial(t, r.HostAddr("mx.sendmail.test"), src)
		if g.code != 220 {
			t.Fatalf("greeting %v", g)
		}
		c.expect("EHLO client.test", "250")
		c.expect("MAIL FROM:<probe@verify.test>", "250")
		c.expect("RCPT TO:<alice@sm.test>", "250")
		c.expect("RCPT TO:<x@small.test>", "250")
		c.expect("RCPT TO:<nobody1@sm.test>", "550 5.1.1")
		c.expect("RCPT TO:<nobody2@sm.test>", "550 5.1.1")
		// Past the throttle (2 refused): a second a reply.
		if rp := c.expect("RCPT TO:<bob@sm.test>", "250"); rp.took < 900*time.Millisecond {
			t.Errorf("reply after 2 refused recipients took %v, want the throttle's second", rp.took)
		}
		c.expect("RSET", "250")
		c.expect("MAIL FROM:<probe@verify.test>", "250")
		for i := range 5 {
			c.expect(fmt.Sprintf("RCPT TO:<u%d@small.test>", i), "250")
		}
		c.expect("RCPT TO:<u5@small.test>", "452 4.5.3")
		c.expect("DATA", "554")
		c.expect("QUIT", "221")
		c.close()
		// ConnRateLimit 3 per 12s: the fourth connection is refused.
		for i := range 3 {
			c, g := dial(t, r.HostAddr("mx.sendmail.test"), src)
			want := 220
			if i == 2 {
				want = 421
			}
			if g.code != want || want == 421 && !strings.Contains(g.msg, "Connection rate limit exceeded") {
				t.Errorf("connection %d: greeting %v, want %d", i+2, g, want)
			}
			c.close()
		}
		// ConnCountLimit 1: a second connection at once is refused.
		c1, g1 := dial(t, r.HostAddr("mx.sendmail2.test"), src)
		_, g2 := dial(t, r.HostAddr("mx.sendmail2.test"), src)
		if g1.code != 220 || g2.code != 421 || !strings.Contains(g2.msg, "Too many open connections") {
			t.Errorf("greetings %v, %v; want 220, then 421 Too many open connections", g1, g2)
		}
		c1.expect("QUIT", "221")
		hc, err := r.HostSettled("mx.sendmail.test", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := HostCounts{Sessions: 4, Disconnects: 4, MAIL: 2, RCPT: 11, RCPTAccepted: 8, RSET: 1, MaxRejected: 2,
			MaxTxnRCPT: 6, Throttled: 1, AnvilRefused: 1, AnvilRate: 1, Disconnected: 1}
		got := hc
		got.Host, got.Kind, got.Rejects = "", "", nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("counts\n got %+v\nwant %+v", got, want)
		}
		if hc.Rejects["550"] != 2 || hc.Rejects["452"] != 1 {
			t.Errorf("rejects %v, want 2×550 and 1×452", hc.Rejects)
		}
	})

	t.Run("haraka", func(t *testing.T) {
		c, g := dial(t, r.HostAddr("mx.haraka.test"), src)
		if g.code != 220 {
			t.Fatalf("greeting %v", g)
		}
		// ConnCountLimit 1: a second connection at once is refused.
		_, g2 := dial(t, r.HostAddr("mx.haraka.test"), src)
		if g2.code != 421 {
			t.Errorf("second connection at once: %v, want 421", g2)
		}
		c.expect("EHLO client.test", "250")
		c.expect("MAIL FROM:<probe@verify.test>", "250")
		c.expect("RCPT TO:<alice@hk.test>", "250")
		c.expect("RCPT TO:<x@hkall.test>", "250")
		if rp := c.expect("RCPT TO:<alice@else.test>", "550"); rp.took > 500*time.Millisecond {
			t.Errorf("took %v before any unknown recipient", rp.took)
		}
		c.expect("RCPT TO:<nobody@hk.test>", "550 5.1.1")
		// Karma: a refused recipient makes the score negative; every reply
		// then waits (tarpit max 1s, the kit's default).
		if rp := c.expect("RCPT TO:<bob@hk.test>", "250"); rp.took < 900*time.Millisecond {
			t.Errorf("reply after an unknown recipient took %v, want karma's tarpit second", rp.took)
		}
		c.expect("RSET", "250")
		c.expect("MAIL FROM:<probe@verify.test>", "250")
		for i := range 3 {
			c.expect(fmt.Sprintf("RCPT TO:<u%d@hkall.test>", i), "250")
		}
		// RecipientLimit 8 a connection: the 9th attempt is refused.
		c.expect("RCPT TO:<u9@hkall.test>", "4")
		c.expect("QUIT", "221")
		c.close()
		hc, err := r.HostSettled("mx.haraka.test", 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", hc)
		if hc.Sessions != 2 || hc.AnvilCount != 1 || hc.RCPT != 9 || hc.RCPTAccepted != 6 || hc.Throttled < 5 || hc.MaxConcurrent != 1 && hc.MaxConcurrent != 2 {
			t.Errorf("counts %+v", hc)
		}
	})
}
