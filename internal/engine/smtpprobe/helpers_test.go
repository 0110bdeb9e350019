package smtpprobe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// env is a mail world with a resolver for it, and the dialer that reaches
// its hosts.
type env struct {
	t    testing.TB
	w    *mailworld.World
	r    *mxdns.Resolver
	n    *memnet.Network // nil: the world is on loopback
	dial DialFunc
}

// startWorld starts a mail world on an in-memory network, for a test in a
// synctest bubble: its greylisting windows, tarpits, latencies and every
// wait of the prober pass in simulated time, and the test's timing
// assertions are exact. It checks, when the test ends, that no DATA
// command ever reached the world; before that, the bubble's clock runs on
// until what the test left behind (idle sessions, deferred retries) is
// done: every goroutine of a bubble must end with it.
func startWorld(t *testing.T, opts mailworld.Options, domains ...mailworld.Domain) *env {
	t.Helper()
	n := memnet.New()
	opts.Network = n
	e := openWorld(t, opts, domains)
	e.n, e.dial = n, guarded(t, n.DialContext)
	e.r = mxdns.New(mxdns.Config{Server: e.w.DNSAddr(), Timeout: time.Second, Dial: n.DialContext})
	t.Cleanup(settle)
	return e
}

// settle lets the bubble's clock run until the work a test left behind is
// done.
func settle() { simtime.Advance(time.Hour) }

// loopbackWorld starts a mail world on loopback, for the tests on the
// wall clock: against a real Redis, with a child process, and the
// benchmark.
func loopbackWorld(t testing.TB, opts mailworld.Options, domains ...mailworld.Domain) *env {
	t.Helper()
	e := openWorld(t, opts, domains)
	e.dial = loopbackDialer(t)
	e.r = mxdns.New(mxdns.Config{Server: e.w.DNSAddr(), Timeout: time.Second})
	return e
}

func openWorld(t testing.TB, opts mailworld.Options, domains []mailworld.Domain) *env {
	t.Helper()
	w, err := mailworld.Start(context.Background(), domains, opts)
	if err != nil {
		t.Fatalf("mailworld.Start: %v", err)
	}
	t.Cleanup(func() {
		if st := w.Stats(); st.DATA != 0 {
			t.Errorf("DATA sent %d times", st.DATA)
		}
		w.Close()
	})
	return &env{t: t, w: w}
}

func (e *env) mx(domain string) []mxdns.MXHost {
	e.t.Helper()
	res, err := e.r.Lookup(context.Background(), domain)
	if err != nil || res.Status != mxdns.OK {
		e.t.Fatalf("Lookup(%s): %v %v", domain, res.Status, err)
	}
	return res.MX
}

// guarded refuses (and reports) any address outside 127.0.0.0/8, and
// dials the others with dial.
func guarded(t testing.TB, dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is4() || !ip.IsLoopback() {
			t.Errorf("dial outside 127.0.0.0/8: %s", addr)
			return nil, errors.New("test dialer: not loopback")
		}
		return dial(ctx, network, addr)
	}
}

// loopbackDialer dials real sockets in 127.0.0.0/8 only.
func loopbackDialer(t testing.TB) DialFunc {
	var d net.Dialer
	return guarded(t, d.DialContext)
}

// testConfig is a Config with short timeouts for the world's port.
func (e *env) config() Config {
	connect := 500 * time.Millisecond
	if e.n == nil {
		// On loopback a connect waits only for the world's accept loop,
		// which a loaded machine may not schedule for seconds; no test on
		// loopback is about connect timeouts (those use hanging dialers).
		connect = 10 * time.Second
	}
	return Config{
		Port:               e.w.SMTPPort(),
		HELOName:           "verify.example.test",
		MailFrom:           "verify@example.test",
		ConnectTimeout:     connect,
		CommandTimeout:     time.Second,
		MaxConnsPerHost:    2,
		RatePerHost:        1000,
		GreylistRetry:      200 * time.Millisecond,
		MaxGreylistRetries: 2,
		Dialer:             e.dial,
	}
}

func (e *env) prober(mod func(*Config)) *Prober {
	cfg := e.config()
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg)
}

// truthOf maps an outcome to mailworld's ground-truth category.
func truthOf(o Outcome) string {
	switch o {
	case Deliverable:
		return mailworld.TruthDeliverable
	case CatchAll:
		return mailworld.TruthCatchAll
	case Missing:
		return mailworld.TruthMissing
	case Full:
		return mailworld.TruthFull
	case Policy:
		return mailworld.TruthPolicy
	case Timeout:
		return mailworld.TruthTimeout
	}
	return mailworld.TruthUnconfirmed
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func hostStats(e *env, host string) mailworld.HostStats {
	e.t.Helper()
	hs, ok := e.w.Stats().Hosts[host]
	if !ok {
		e.t.Fatalf("no host %s", host)
	}
	return hs
}

// probeKnown probes addrs of domain and fails t unless every one is
// Deliverable where ok says so and Missing elsewhere; it returns how long
// the probe took.
func probeKnown(t *testing.T, e *env, p *Prober, domain string, addrs []string, ok map[string]bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	res := make([]Result, len(addrs))
	if err := p.ProbeBatch(ctxTimeout(t, 10*time.Minute), domain, e.mx(domain), addrs, res); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	for i, r := range res {
		want := Missing
		if ok[addrs[i]] {
			want = Deliverable
		}
		if r.Outcome != want {
			t.Fatalf("%s: %v (%v), want %v", addrs[i], r.Outcome, r.Err, want)
		}
	}
	return took
}

// greylistBeside probes a@grey.test (a greylisting domain of e) on its
// own goroutine, leaves it waiting for its retry, and returns what waits
// for its verdict: the process then has a greylisting retry ahead.
func greylistBeside(t *testing.T, e *env, p *Prober) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		res := make([]Result, 1)
		if err := p.ProbeBatch(ctxTimeout(t, 10*time.Minute), "grey.test", e.mx("grey.test"), []string{"a@grey.test"}, res); err != nil || res[0].Outcome != Deliverable {
			t.Errorf("a@grey.test: %v (%v)", res[0].Outcome, err)
		}
	})
	simtime.Advance(time.Second) // its 451 is in
	return &wg
}
