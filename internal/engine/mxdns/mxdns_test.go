package mxdns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// server is a DNS server on a test's in-memory network.
type server struct {
	addr string
	net  *memnet.Network
}

// memWorld starts a mail world on an in-memory network: in a synctest
// bubble its lookups wait in simulated time.
func memWorld(t testing.TB, domains ...mailworld.Domain) (*mailworld.World, server) {
	t.Helper()
	n := memnet.New()
	w, err := mailworld.Start(context.Background(), domains, mailworld.Options{Network: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, server{addr: w.DNSAddr(), net: n}
}

// startWorld starts a mail world on loopback, for the benchmarks (they
// measure the resolver against a real socket) and the test of the default
// dialer.
func startWorld(t testing.TB, domains ...mailworld.Domain) *mailworld.World {
	t.Helper()
	w, err := mailworld.Start(context.Background(), domains, mailworld.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// newResolver is a resolver of srv for a test in a synctest bubble. When
// the test ends the bubble's clock runs on until the work left behind
// (a flight whose caller gave up, a socket's deadline) is done: every
// goroutine of a bubble must end with it.
func newResolver(t *testing.T, srv server, cfg Config) *Resolver {
	cfg.Server, cfg.Dial = srv.addr, srv.net.DialContext
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	t.Cleanup(func() { simtime.Advance(time.Hour) })
	return New(cfg)
}

func mustLookup(t testing.TB, r *Resolver, domain string) Result {
	t.Helper()
	res, err := r.Lookup(context.Background(), domain)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", domain, err)
	}
	return res
}

// ips returns the IPs of the world's MX addresses of a domain.
func ips(t testing.TB, w *mailworld.World, domain string) []netip.Addr {
	var out []netip.Addr
	for _, a := range w.MXAddrs(domain) {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ap.Addr())
	}
	return out
}

func TestLookupShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, srv := memWorld(t,
			mailworld.Domain{Name: "ok.test", MXHosts: 3, TTL: 120},
			mailworld.Domain{Name: "implicit.test", NoMX: true, TTL: 100},
			mailworld.Domain{Name: "null.test", NullMX: true, TTL: 200},
			mailworld.Domain{Name: "nx.test", NXDomain: true, TTL: 40},
			mailworld.Domain{Name: "noaddr.test", NoAddress: true, TTL: 50},
			mailworld.Domain{Name: "pd.test", PrimaryDown: true},
			mailworld.Domain{Name: "hosted.test", Provider: "bigmail.test", MXHosts: 2},
		)
		r := newResolver(t, srv, Config{MinTTL: -1})

		res := mustLookup(t, r, "OK.Test.")
		if res.Domain != "ok.test" || res.Status != OK || res.Implicit || len(res.MX) != 3 || res.TTL != 120*time.Second {
			t.Fatalf("ok: %+v", res)
		}
		want := ips(t, w, "ok.test")
		for i, mx := range res.MX {
			if mx.Host != fmt.Sprintf("mx%d.ok.test", i+1) || mx.Pref != uint16(10*(i+1)) || len(mx.Addrs) != 1 || mx.Addrs[0] != want[i] {
				t.Fatalf("MX %d: %+v (want %v)", i, mx, want[i])
			}
		}

		res = mustLookup(t, r, "implicit.test")
		if res.Status != OK || !res.Implicit || len(res.MX) != 1 || res.MX[0].Host != "implicit.test" || res.MX[0].Pref != 0 ||
			res.MX[0].Addrs[0] != ips(t, w, "implicit.test")[0] || res.TTL != 100*time.Second {
			t.Fatalf("implicit: %+v", res)
		}

		res = mustLookup(t, r, "null.test")
		if res.Status != NullMX || len(res.MX) != 0 || res.TTL != 200*time.Second {
			t.Fatalf("null: %+v", res)
		}
		if w.DNSQueries("null.test", "A") != 0 {
			t.Fatal("null MX must not fall back to A")
		}

		res = mustLookup(t, r, "nx.test")
		if res.Status != NXDomain || res.TTL != 40*time.Second {
			t.Fatalf("nx: %+v", res)
		}
		if res = mustLookup(t, r, "never-declared.test"); res.Status != NXDomain {
			t.Fatalf("unknown: %+v", res)
		}

		res = mustLookup(t, r, "noaddr.test")
		if res.Status != NoAddress || res.TTL != 50*time.Second {
			t.Fatalf("noaddr: %+v", res)
		}

		// Secondary MX: the primary's port is down but DNS still lists both, in order.
		res = mustLookup(t, r, "pd.test")
		if res.Status != OK || len(res.MX) != 2 || res.MX[0].Host != "mx1.pd.test" || res.MX[1].Host != "mx2.pd.test" ||
			res.MX[1].Addrs[0] != ips(t, w, "pd.test")[1] {
			t.Fatalf("pd: %+v", res)
		}
		res = mustLookup(t, r, "hosted.test")
		if res.Status != OK || len(res.MX) != 2 || res.MX[0].Host != "mx1.bigmail.test" {
			t.Fatalf("hosted: %+v", res)
		}
		if st := r.Stats(); st.Lookups != 8 || st.CacheHits != 0 || st.Resolutions != 8 || st.CacheSize != 8 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestPreferenceOrderAndDroppedHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeDNS(t,
			"order.test. 300 IN MX 20 b.mx.test.",
			"order.test. 300 IN MX 5 z.mx.test.",
			"order.test. 300 IN MX 20 a.mx.test.",
			"order.test. 300 IN MX 30 gone.mx.test.", // no address: dropped
			"order.test. 300 IN MX 40 A.MX.TEST.",    // duplicate of a.mx.test
			"a.mx.test. 60 IN A 127.0.0.3",
			"a.mx.test. 60 IN AAAA ::1",
			"a.mx.test. 60 IN A 127.0.0.2",
			"b.mx.test. 300 IN A 127.0.0.4",
			"z.mx.test. 300 IN AAAA ::1",
			"dead.test. 300 IN MX 10 gone.mx.test.",
			"dead.test. 300 IN MX 20 gone2.mx.test.",
		)
		f.set(func(f *fakeDNS) { f.nx["gone2.mx.test."] = true })
		r := newResolver(t, f.srv, Config{MinTTL: -1})
		res := mustLookup(t, r, "order.test")
		var got []string
		for _, mx := range res.MX {
			got = append(got, fmt.Sprintf("%d %s %v", mx.Pref, mx.Host, mx.Addrs))
		}
		want := []string{"5 z.mx.test [::1]", "20 a.mx.test [127.0.0.2 127.0.0.3 ::1]", "20 b.mx.test [127.0.0.4]"}
		if fmt.Sprint(got) != fmt.Sprint(want) || res.Status != OK {
			t.Fatalf("got %q\nwant %q", got, want)
		}
		// min(MX 300, a.mx A 60, the dropped host's negative TTL 15 from the SOA);
		// z.mx.test's missing A does not count since it has an AAAA.
		if res.TTL != 15*time.Second {
			t.Fatalf("TTL %v, want the min of the relevant TTLs", res.TTL)
		}
		res = mustLookup(t, r, "dead.test")
		if res.Status != NoAddress || len(res.MX) != 0 {
			t.Fatalf("dead: %+v", res)
		}
		// gone.mx.test was resolved once and cached for both domains.
		if n := f.count("gone.mx.test", "A"); n != 1 {
			t.Fatalf("gone.mx.test A queried %d times", n)
		}
	})
}

func TestCNAME(t *testing.T) {
	recs := []string{
		"alias.test. 100 IN CNAME real.test.",
		"real.test. 300 IN MX 10 mxalias.real.test.",
		"mxalias.real.test. 300 IN CNAME host.real.test.",
		"host.real.test. 300 IN A 127.0.0.7",
		"web.test. 50 IN CNAME www.real.test.",
		"www.real.test. 300 IN A 127.0.0.8",
		"loop1.test. 300 IN CNAME loop2.test.",
		"loop2.test. 300 IN CNAME loop1.test.",
	}
	for _, chase := range []bool{true, false} {
		t.Run(fmt.Sprintf("chase=%v", chase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeDNS(t, recs...)
				f.set(func(f *fakeDNS) { f.chase = chase })
				r := newResolver(t, f.srv, Config{MinTTL: -1})
				res := mustLookup(t, r, "alias.test")
				if res.Status != OK || len(res.MX) != 1 || res.MX[0].Host != "mxalias.real.test" ||
					res.MX[0].Addrs[0] != netip.MustParseAddr("127.0.0.7") || res.TTL != 100*time.Second {
					t.Fatalf("alias: %+v", res)
				}
				res = mustLookup(t, r, "web.test") // CNAME, no MX: implicit MX via the CNAME target's A
				if res.Status != OK || !res.Implicit || res.MX[0].Addrs[0] != netip.MustParseAddr("127.0.0.8") {
					t.Fatalf("web: %+v", res)
				}
				res, err := r.Lookup(context.Background(), "loop1.test")
				if !errors.Is(err, errCNAMELoop) || res.Status != ServFail {
					t.Fatalf("loop: %+v %v", res, err)
				}
				n := f.count("loop1.test", "MX") + f.count("loop2.test", "MX")
				r.Lookup(context.Background(), "loop1.test") // cached for TempTTL
				if m := f.count("loop1.test", "MX") + f.count("loop2.test", "MX"); m != n || n > maxCNAME+1 {
					t.Fatalf("loop queries: %d then %d", n, m)
				}
			})
		})
	}
}

func TestTTLExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, srv := memWorld(t, mailworld.Domain{Name: "short.test", TTL: 2}, mailworld.Domain{Name: "gone.test", NXDomain: true, TTL: 3})
		r := newResolver(t, srv, Config{MinTTL: -1})
		for _, d := range []string{"short.test", "gone.test"} {
			mustLookup(t, r, d)
		}
		q0 := r.Stats().Queries
		simtime.Advance(1500 * time.Millisecond)
		res := mustLookup(t, r, "short.test")
		mustLookup(t, r, "gone.test")
		if r.Stats().Queries != q0 || res.TTL != 500*time.Millisecond {
			t.Fatalf("expected cache hits: queries %d→%d, TTL %v", q0, r.Stats().Queries, res.TTL)
		}
		simtime.Advance(time.Second) // short.test expired (2s), gone.test not (3s)
		mustLookup(t, r, "short.test")
		mustLookup(t, r, "gone.test")
		if got := w.DNSQueries("short.test", "MX"); got != 2 {
			t.Fatalf("short.test MX queries = %d, want 2", got)
		}
		if got := w.DNSQueries("gone.test", "MX"); got != 1 {
			t.Fatalf("gone.test MX queries = %d, want 1", got)
		}
		simtime.Advance(time.Second)
		mustLookup(t, r, "gone.test")
		if got := w.DNSQueries("gone.test", "MX"); got != 2 {
			t.Fatalf("gone.test MX queries = %d, want 2", got)
		}

		// Clamping: MinTTL raises, NegativeTTL caps negative answers.
		r2 := newResolver(t, srv, Config{MinTTL: 10 * time.Second, MaxTTL: time.Minute, NegativeTTL: 20 * time.Second})
		if res := mustLookup(t, r2, "short.test"); res.TTL != 10*time.Second {
			t.Fatalf("min clamp: %v", res.TTL)
		}
		_, srv2 := memWorld(t, mailworld.Domain{Name: "long.test", TTL: 86400}, mailworld.Domain{Name: "nxlong.test", NXDomain: true, TTL: 86400})
		r3 := newResolver(t, srv2, Config{MinTTL: 5 * time.Second, MaxTTL: time.Minute, NegativeTTL: 20 * time.Second})
		if res := mustLookup(t, r3, "long.test"); res.TTL != time.Minute {
			t.Fatalf("max clamp: %v", res.TTL)
		}
		if res := mustLookup(t, r3, "nxlong.test"); res.TTL != 20*time.Second {
			t.Fatalf("negative clamp: %v", res.TTL)
		}
	})
}

func TestCacheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ds []mailworld.Domain
		for i := 0; i < 6; i++ {
			ds = append(ds, mailworld.Domain{Name: fmt.Sprintf("d%d.test", i)})
		}
		w, srv := memWorld(t, ds...)
		r := newResolver(t, srv, Config{CacheSize: 3})
		for i := 0; i < 3; i++ {
			mustLookup(t, r, fmt.Sprintf("d%d.test", i))
		}
		mustLookup(t, r, "d0.test") // touch: d1 is now the least recently used
		for i := 3; i < 5; i++ {
			mustLookup(t, r, fmt.Sprintf("d%d.test", i))
		}
		st := r.Stats()
		if st.CacheSize != 3 || st.CacheHits != 1 {
			t.Fatalf("stats %+v", st)
		}
		mustLookup(t, r, "d0.test") // kept
		if w.DNSQueries("d0.test", "MX") != 1 {
			t.Fatal("d0 was evicted")
		}
		mustLookup(t, r, "d1.test") // evicted
		if w.DNSQueries("d1.test", "MX") != 2 {
			t.Fatal("d1 should have been evicted")
		}
		if st := r.Stats(); st.CacheSize != 3 || st.Evictions < 3 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestSingleflight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Against mailworld: however the goroutines interleave, one set of queries.
		w, srv := memWorld(t, mailworld.Domain{Name: "hot.test", MXHosts: 2})
		r := newResolver(t, srv, Config{})
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 64; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if res, err := r.Lookup(context.Background(), "hot.test"); err != nil || len(res.MX) != 2 {
					t.Errorf("Lookup: %+v %v", res, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := w.DNSQueries("hot.test", "MX"); got != 1 {
			t.Fatalf("MX queries = %d, want 1", got)
		}
		for _, h := range []string{"mx1.hot.test", "mx2.hot.test"} {
			if w.DNSQueries(h, "A") != 1 || w.DNSQueries(h, "AAAA") != 1 {
				t.Fatalf("%s: A=%d AAAA=%d", h, w.DNSQueries(h, "A"), w.DNSQueries(h, "AAAA"))
			}
		}
		if st := r.Stats(); st.Queries != 5 || st.Resolutions != 1 {
			t.Fatalf("stats %+v", st)
		}

		// Against a slow server: every caller is in flight at the same time
		// (they all start before the bubble's clock moves), and all are
		// answered when the one resolution is: the MX answer at 100 ms, the
		// host's A and AAAA (asked together) at 200 ms.
		f := newFakeDNS(t, "slow.test. 300 IN MX 10 mx.slow.test.", "mx.slow.test. 300 IN A 127.0.0.9")
		f.set(func(f *fakeDNS) { f.delay = 100 * time.Millisecond })
		r2 := newResolver(t, f.srv, Config{})
		begin := time.Now()
		for i := 0; i < 32; i++ {
			wg.Go(func() {
				if _, err := r2.Lookup(context.Background(), "slow.test"); err != nil {
					t.Error(err)
				}
				if took := time.Since(begin); took != 200*time.Millisecond {
					t.Errorf("answered after %v, want with the resolution at 200ms", took)
				}
			})
		}
		wg.Wait()
		if st := r2.Stats(); st.Resolutions != 1 || f.count("slow.test", "MX") != 1 || st.Queries != 3 {
			t.Fatalf("stats %+v, MX queries %d", st, f.count("slow.test", "MX"))
		}
	})
}

// tarpitUDP is a DNS server that never answers.
func tarpitUDP(t testing.TB) server {
	n := memnet.New()
	pc, err := n.ListenPacket("udp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return server{addr: pc.LocalAddr().String(), net: n}
}

func TestTimeoutNotCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newResolver(t, tarpitUDP(t), Config{Timeout: 100 * time.Millisecond, Attempts: 2})
		t0 := time.Now()
		res, err := r.Lookup(context.Background(), "example.test")
		var e *Error
		if err == nil || !errors.As(err, &e) || !e.Timeout() || !e.Temporary() || res.Status != Timeout || !res.Status.Temporary() {
			t.Fatalf("got %+v, %v", res, err)
		}
		if d := time.Since(t0); d != 200*time.Millisecond {
			t.Fatalf("took %v, want 2 attempts x 100ms", d)
		}
		if st := r.Stats(); st.Queries != 2 || st.Timeouts != 2 || st.CacheSize != 0 {
			t.Fatalf("stats %+v", st)
		}
		if _, err := r.Lookup(context.Background(), "example.test"); err == nil {
			t.Fatal("second lookup succeeded")
		}
		if st := r.Stats(); st.Queries != 4 || st.CacheHits != 0 {
			t.Fatalf("timeout was cached: %+v", st)
		}
	})
}

func TestContextCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newResolver(t, tarpitUDP(t), Config{Timeout: 2 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		res, err := r.Lookup(ctx, "example.test")
		if !errors.Is(err, context.DeadlineExceeded) || res.Status != Timeout {
			t.Fatalf("got %+v, %v", res, err)
		}
		if d := time.Since(t0); d != 30*time.Millisecond {
			t.Fatalf("Lookup returned after %v, want at its context's deadline (30ms)", d)
		}
		done, cancel2 := context.WithCancel(context.Background())
		cancel2()
		if _, err := r.Lookup(done, "other.test"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled ctx: %v", err)
		}
	})
}

func TestServFailCachedBriefly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeDNS(t)
		f.set(func(f *fakeDNS) { f.servfail["broken.test."] = true })
		r := newResolver(t, f.srv, Config{TempTTL: 5 * time.Second})
		for i := 0; i < 3; i++ {
			res, err := r.Lookup(context.Background(), "broken.test")
			if !errors.Is(err, ErrServerFailure) || res.Status != ServFail {
				t.Fatalf("got %+v %v", res, err)
			}
		}
		if n := f.count("broken.test", "MX"); n != 1 {
			t.Fatalf("MX queries %d, want 1 (SERVFAIL cached)", n)
		}
		simtime.Advance(6 * time.Second)
		r.Lookup(context.Background(), "broken.test")
		if n := f.count("broken.test", "MX"); n != 2 {
			t.Fatalf("MX queries %d, want 2 after TempTTL", n)
		}
	})
}

func TestTruncatedRetriesOverTCP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeDNS(t, "big.test. 300 IN MX 10 mx.big.test.", "mx.big.test. 300 IN A 127.0.0.5")
		f.set(func(f *fakeDNS) { f.truncUDP = true })
		r := newResolver(t, f.srv, Config{})
		res := mustLookup(t, r, "big.test")
		if res.Status != OK || res.MX[0].Addrs[0] != netip.MustParseAddr("127.0.0.5") {
			t.Fatalf("%+v", res)
		}
		if udp, tcp := f.transports(); r.Stats().TCPFallbacks != 3 || tcp != 3 || udp != 3 {
			t.Fatalf("stats %+v udp=%d tcp=%d", r.Stats(), udp, tcp)
		}
	})
}

func TestPartialHostFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeDNS(t,
			"part.test. 3600 IN MX 10 good.part.test.",
			"part.test. 3600 IN MX 20 bad.part.test.",
			"good.part.test. 3600 IN A 127.0.0.6",
			"allbad.test. 3600 IN MX 10 bad.part.test.",
		)
		f.set(func(f *fakeDNS) { f.servfail["bad.part.test."] = true })
		r := newResolver(t, f.srv, Config{TempTTL: 5 * time.Second})
		res := mustLookup(t, r, "part.test")
		if res.Status != OK || len(res.MX) != 1 || res.TTL != 5*time.Second {
			t.Fatalf("partial: %+v", res)
		}
		res, err := r.Lookup(context.Background(), "allbad.test")
		if res.Status != ServFail || !errors.Is(err, ErrServerFailure) {
			t.Fatalf("allbad: %+v %v", res, err)
		}
	})
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"example.test": "example.test", "Example.TEST.": "example.test", "bücher.test": "xn--bcher-kva.test",
		"BÜCHER.test": "xn--bcher-kva.test", "_dmarc.x.test": "_dmarc.x.test",
	} {
		if got, ok := normalize(in); !ok || got != want {
			t.Errorf("normalize(%q) = %q, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", ".", "a..b", "a b.test", "[127.0.0.1]", string(make([]byte, 64)) + ".test", "x@y.test"} {
		if _, ok := normalize(in); ok {
			t.Errorf("normalize(%q) accepted", in)
		}
	}
	srv := tarpitUDP(t)
	r := New(Config{Server: srv.addr, Dial: srv.net.DialContext})
	res, err := r.Lookup(context.Background(), "a..b")
	if err != nil || res.Status != NXDomain || r.Stats().Queries != 0 {
		t.Fatalf("invalid: %+v %v", res, err)
	}
	if n := testing.AllocsPerRun(100, func() { normalize("mail.example.test") }); n != 0 {
		t.Fatalf("normalize allocates %v", n)
	}
}

func TestDefaultServer(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"# x\nsearch a.b\nnameserver 10.96.0.10\nnameserver 1.1.1.1\n": "10.96.0.10:53",
		"nameserver fe80::1%eth0\n":                                    "[fe80::1%eth0]:53",
		"nameserver bogus\nnameserver ::1\n":                           "[::1]:53",
		"options ndots:5\n":                                            "127.0.0.1:53",
	} {
		p := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := defaultServerFrom(p); got != want {
			t.Errorf("%q: got %q want %q", content, got, want)
		}
	}
	if got := defaultServerFrom(filepath.Join(dir, "missing")); got != "127.0.0.1:53" {
		t.Errorf("missing file: %q", got)
	}
	if DefaultServer() == "" {
		t.Error("empty DefaultServer")
	}
}

// (On loopback: the resolver's default dialer, real sockets, as in
// production.)
func TestCachedLookupDoesNotAllocate(t *testing.T) {
	w := startWorld(t, mailworld.Domain{Name: "a.test"})
	r := New(Config{Server: w.DNSAddr(), Timeout: time.Second})
	mustLookup(t, r, "a.test")
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { r.Lookup(ctx, "a.test") }); n != 0 {
		t.Fatalf("cached Lookup allocates %v times", n)
	}
}

func BenchmarkLookupCached(b *testing.B) {
	w := startWorld(b, mailworld.Domain{Name: "bench.test", MXHosts: 2})
	r := New(Config{Server: w.DNSAddr()})
	ctx := context.Background()
	if _, err := r.Lookup(ctx, "bench.test"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Lookup(ctx, "bench.test"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookupCachedParallel(b *testing.B) {
	domains, _ := mailworld.Generate(1, 1000, 0)
	w := startWorld(b, domains...)
	r := New(Config{Server: w.DNSAddr()})
	ctx := context.Background()
	names := w.Domains()
	for _, d := range names {
		r.Lookup(ctx, d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Lookup(ctx, names[i%len(names)])
			i++
		}
	})
}

// BenchmarkLookupUncached measures a full resolution (MX + A/AAAA of the
// hosts) against the loopback mailworld DNS server.
func BenchmarkLookupUncached(b *testing.B) {
	w := startWorld(b, mailworld.Domain{Name: "bench.test", MXHosts: 2})
	r := New(Config{Server: w.DNSAddr()})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Flush()
		if _, err := r.Lookup(ctx, "bench.test"); err != nil {
			b.Fatal(err)
		}
	}
}

// Queries reuse pooled UDP sockets instead of opening one each.
func TestUDPSocketsReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var recs []string
		for i := range 40 {
			recs = append(recs, fmt.Sprintf("d%d.test. 300 IN MX 10 mx.d%d.test.", i, i), fmt.Sprintf("mx.d%d.test. 300 IN A 192.0.2.%d", i, i+1))
		}
		f := newFakeDNS(t, recs...)
		r := newResolver(t, f.srv, Config{Timeout: time.Second})
		for i := range 40 {
			if res, err := r.Lookup(context.Background(), fmt.Sprintf("d%d.test", i)); err != nil || res.Status != OK {
				t.Fatalf("d%d: %v %v", i, res.Status, err)
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.udpN < 80 || len(f.ports) > 2 {
			t.Fatalf("%d UDP queries from %d sockets", f.udpN, len(f.ports))
		}
	})
}

// A UDP query lost on the way is sent again within its attempt, after the
// retransmission timeout, not after the attempt's Timeout: with one
// attempt of a minute and a lookup given 20 s, each lost question is
// answered from its copy.
func TestLostQuerySentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeDNS(t, "lossy.test. 300 IN MX 10 mx.lossy.test.", "mx.lossy.test. 300 IN A 192.0.2.7")
		f.set(func(f *fakeDNS) { f.loseUDP = true })
		r := newResolver(t, f.srv, Config{Timeout: time.Minute, Attempts: 1})
		r.rtt.initial = 200 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		res, err := r.Lookup(ctx, "lossy.test")
		if err != nil || res.Status != OK || len(res.MX) != 1 {
			t.Fatalf("got %+v, %v", res, err)
		}
		// The MX question's copy goes at the first timeout (200 ms); its
		// answer, timed from the first copy, sets the next timeout to
		// 200 + 4 × 100 ms, when the A and AAAA questions' copies go.
		if took := time.Since(start); took != 200*time.Millisecond+600*time.Millisecond {
			t.Fatalf("took %v, want 200ms + 600ms of retransmission timeouts", took)
		}
		st := r.Stats()
		// MX, A and AAAA: each lost once, each answered from its copy.
		if st.Retransmits != 3 || st.Timeouts != 0 || st.Queries != 6 {
			t.Fatalf("stats %+v", st)
		}
		if n := f.count("lossy.test", "MX"); n != 2 {
			t.Fatalf("MX sent %d times, want 2", n)
		}
	})
}

// A slow resolver is not flooded with copies: once its answers were timed,
// the retransmission timeout covers them, and late answers to copies on a
// reused socket are skipped by their IDs.
func TestSlowResolverNotFlooded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var recs []string
		for i := range 2 {
			recs = append(recs, fmt.Sprintf("s%d.test. 300 IN MX 10 mx.s%d.test.", i, i), fmt.Sprintf("mx.s%d.test. 300 IN A 192.0.2.%d", i, i+1))
		}
		f := newFakeDNS(t, recs...)
		f.set(func(f *fakeDNS) { f.delay = 300 * time.Millisecond })
		r := newResolver(t, f.srv, Config{Timeout: 10 * time.Second, Attempts: 1})
		r.rtt.initial = 200 * time.Millisecond
		for i := range 2 {
			if res, err := r.Lookup(context.Background(), fmt.Sprintf("s%d.test", i)); err != nil || res.Status != OK {
				t.Fatalf("s%d: %+v %v", i, res, err)
			}
		}
		// The first question waits the first timeout (200 ms) and is sent
		// again; its answer (300 ms) sets the timeout above the server's time
		// (900 ms, decaying towards 300 ms over the next five). A fixed 200 ms
		// would have copied all six questions.
		if st := r.Stats(); st.Retransmits != 1 || st.Timeouts != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// Cancelling the lookup's context ends a wait for an answer at once, also
// without a deadline.
func TestCancelEndsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newResolver(t, tarpitUDP(t), Config{Timeout: time.Minute, Attempts: 1})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		if _, err := r.Lookup(ctx, "example.test"); !errors.Is(err, context.Canceled) || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("got %v after %v, want the cancellation at 50ms", err, time.Since(start))
		}
	})
}

func TestRetransmissionTimeout(t *testing.T) {
	steady := make([]time.Duration, 20)
	for i := range steady {
		steady[i] = time.Second
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		limit   time.Duration
		lo, hi  time.Duration
	}{
		{"none timed yet", nil, time.Minute, initialRTO, initialRTO},
		{"none timed, short attempt", nil, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		{"fast server: the floor", []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Millisecond}, time.Minute, minRTO, minRTO},
		{"one sample: srtt + 4 × srtt/2", []time.Duration{400 * time.Millisecond}, time.Minute, 1200 * time.Millisecond, 1200 * time.Millisecond},
		// rttvar loses a quarter a sample: 20 equal ones leave it near 0.
		{"steady 1 s", steady, time.Minute, time.Second, 1100 * time.Millisecond},
		{"capped by the attempt", []time.Duration{3 * time.Second}, 2 * time.Second, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e rttEstimator
			for _, s := range tc.samples {
				e.sample(s)
			}
			if got := e.rto(tc.limit); got < tc.lo || got > tc.hi {
				t.Fatalf("rto %v, want in [%v, %v]", got, tc.lo, tc.hi)
			}
		})
	}
}
