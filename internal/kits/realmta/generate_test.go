package realmta

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

func TestGenerateDeterministic(t *testing.T) {
	w1, rows1 := Generate(7, 300, 2000, GenOptions{})
	w2, rows2 := Generate(7, 300, 2000, GenOptions{})
	if fmt.Sprint(w1) != fmt.Sprint(w2) || !slices.Equal(rows1, rows2) {
		t.Fatal("same seed, different world or list")
	}
	if _, rows3 := Generate(8, 300, 2000, GenOptions{}); slices.Equal(rows1, rows3) {
		t.Error("different seeds, same list")
	}
	if err := w1.validate("test"); err != nil {
		t.Fatal(err)
	}
	if len(rows1) != 2000 {
		t.Errorf("%d rows, want 2000", len(rows1))
	}
	seen := map[string]bool{}
	cats := map[string]int{}
	kinds := map[string]int{}
	for _, r := range rows1 {
		if seen[r] {
			t.Fatalf("duplicate row %s", r)
		}
		seen[r] = true
		tr := w1.Truth(r)
		cats[tr.Verdict]++
		kinds[tr.Kind]++
	}
	for _, c := range []string{mailworld.TruthDeliverable, mailworld.TruthMissing, mailworld.TruthFull, mailworld.TruthCatchAll,
		mailworld.TruthGreylisted, mailworld.TruthPolicy, mailworld.TruthNXDomain, mailworld.TruthNullMX, mailworld.TruthNoAddress} {
		if cats[c] == 0 {
			t.Errorf("no %s rows: %v", c, cats)
		}
	}
	for _, h := range StandardHosts(12) {
		if kinds[h.Kind()] == 0 {
			t.Errorf("no rows on a %s host: %v", h.Kind(), kinds)
		}
	}
	t.Logf("categories %v; host kinds %v", cats, kinds)
}

// GenOptions: Tarpits adds the silent hosts (their rows are timeouts),
// NoGreylist leaves no greylisted row and changes nothing else.
func TestGenerateOptions(t *testing.T) {
	w, rows := Generate(7, 1000, 3000, GenOptions{Tarpits: true})
	if err := w.validate("test"); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range rows {
		tr := w.Truth(r)
		kinds[tr.Kind]++
		if (tr.Kind == "postfix+tarpit" || tr.Kind == "postfix+hangup" || tr.Kind == "down") != (tr.Verdict == mailworld.TruthTimeout) {
			t.Errorf("%s: %+v", r, tr)
		}
	}
	for _, h := range TarpitHosts() {
		if kinds[h.Kind()] == 0 {
			t.Errorf("no rows on a %s host: %v", h.Kind(), kinds)
		}
	}
	w1, rows1 := Generate(7, 300, 2000, GenOptions{})
	w2, rows2 := Generate(7, 300, 2000, GenOptions{NoGreylist: true})
	if !slices.Equal(rows1, rows2) || fmt.Sprint(w1.Domains) != fmt.Sprint(w2.Domains) {
		t.Fatal("NoGreylist changed the domains or the list")
	}
	grey := 0
	for _, r := range rows2 {
		t1, t2 := w1.Truth(r), w2.Truth(r)
		if t1.Verdict == mailworld.TruthGreylisted {
			grey++
		}
		if t2.Verdict == mailworld.TruthGreylisted || t2.Underlying != t1.Underlying {
			t.Errorf("%s: %+v without greylisting, %+v with", r, t2, t1)
		}
	}
	if grey == 0 {
		t.Error("no greylisted rows in the default world")
	}
}

// TestGeneratedTruthMatchesServers checks the ground truth against what
// the real servers answer: for a sample of rows per host, the domain's DNS
// (from NSD) and the RCPT reply (from Postfix or Exim) must be what Truth
// says.
func TestGeneratedTruthMatchesServers(t *testing.T) {
	t.Parallel()
	w, rows := Generate(3, 80, 600, GenOptions{AnvilRate: 100})
	r := StartT(t, w, Options{PostscreenGreetWait: time.Second, GreylistDelay: time.Minute})
	perHost := map[string][]string{}
	checked := 0
	for _, a := range rows {
		tr := r.Truth(a)
		if err := checkDNS(r, tr); err != nil {
			t.Errorf("%s: %v", a, err)
		}
		if tr.Host != "" && len(perHost[tr.Host]) < 8 {
			perHost[tr.Host] = append(perHost[tr.Host], a)
		}
	}
	for host, addrs := range perHost {
		c, g := dial(t, r.HostAddr(host), "")
		if g.code != 220 {
			t.Fatalf("%s: greeting %q", host, g)
		}
		c.expect("EHLO client.test", "250")
		for _, a := range addrs {
			c.expect("MAIL FROM:<probe@client.test>", "250")
			rp := c.cmd("RCPT TO:<" + a + ">")
			want := map[string]string{
				mailworld.TruthDeliverable: "250", mailworld.TruthCatchAll: "250", mailworld.TruthMissing: "550",
				mailworld.TruthFull: "552 5.2.2", mailworld.TruthPolicy: "550 5.7.1", mailworld.TruthGreylisted: "450 4.2.0",
			}[r.Truth(a).Verdict]
			if want == "" || !strings.HasPrefix(rp.String(), want) {
				t.Errorf("%s at %s (truth %+v): %q, want %q", a, host, r.Truth(a), rp, want)
			}
			c.expect("RSET", "250")
			checked++
		}
		c.close()
	}
	if checked < 40 {
		t.Errorf("only %d rows checked against the servers", checked)
	}
}

func checkDNS(r *Running, tr Truth) error {
	if tr.Domain == "" {
		return nil
	}
	q := func(qt uint16) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(tr.Domain), qt)
		return dns.Exchange(m, r.DNSAddr())
	}
	mx, err := q(dns.TypeMX)
	if err != nil {
		return err
	}
	a, err := q(dns.TypeA)
	if err != nil {
		return err
	}
	hostIP, _, _ := net.SplitHostPort(r.HostAddr(tr.Host))
	switch tr.Shape {
	case ShapeMX:
		if len(mx.Answer) != 1 || mx.Answer[0].(*dns.MX).Mx != tr.Host+"." {
			return fmt.Errorf("MX %v, want %s", mx.Answer, tr.Host)
		}
	case ShapeAOnly:
		if len(mx.Answer) != 0 || len(a.Answer) != 1 || a.Answer[0].(*dns.A).A.String() != hostIP {
			return fmt.Errorf("MX %v A %v, want no MX and A %s", mx.Answer, a.Answer, hostIP)
		}
	case ShapeNullMX:
		if len(mx.Answer) != 1 || mx.Answer[0].(*dns.MX).Mx != "." {
			return fmt.Errorf("MX %v, want null MX", mx.Answer)
		}
	case ShapeNXDomain:
		if mx.Rcode != dns.RcodeNameError {
			return fmt.Errorf("rcode %s, want NXDOMAIN", dns.RcodeToString[mx.Rcode])
		}
	case ShapeNoAddress:
		if mx.Rcode != dns.RcodeSuccess || len(mx.Answer)+len(a.Answer) != 0 {
			return fmt.Errorf("MX %v A %v, want neither", mx.Answer, a.Answer)
		}
	}
	return nil
}
