package smtpprobe

import (
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/proxypool"
	"github.com/emaildata/emaildata/internal/engine/proxypool/socks5test"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// egressProxies starts n SOCKS5 proxies on the world's network, the ith
// on 127.0.200.i and leaving from that address (memnet.DialerFrom): n
// egress identities that a host tells apart by client address. It
// returns the addresses and the route picker over them.
func egressProxies(t *testing.T, e *env, n int) ([]string, func(*Config)) {
	t.Helper()
	var ips, urls []string
	for i := range n {
		ip := netip.AddrFrom4([4]byte{127, 0, 200, byte(i + 1)})
		ln, err := e.n.Listen("tcp4", netip.AddrPortFrom(ip, 1080).String())
		if err != nil {
			t.Fatal(err)
		}
		s := socks5test.Serve(ln, guarded(t, e.n.DialerFrom(ip)), "probe", "pw")
		t.Cleanup(s.Close)
		ips = append(ips, ip.String())
		urls = append(urls, "socks5://probe:pw@"+s.Addr())
	}
	pool, err := proxypool.New(proxypool.Config{URLs: urls, Forward: e.dial, Backoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return ips, func(c *Config) {
		c.Dialer, c.Routes = pool.Dial, n
		c.PickRoute = func(prefer func(string) bool) (string, DialFunc, error) {
			r, err := pool.PickFor(prefer)
			if err != nil {
				return "", nil, err
			}
			return r.Name(), r.Dial, nil
		}
	}
}

// repWorld is a host that slows every reply to a client address by 1s
// once it has sent 2 unknown recipients, with n addresses of which every
// fourth is unknown.
func repWorld(t *testing.T, n int) (*env, []string) {
	boxes := map[string]mailworld.Behaviour{}
	var addrs []string
	for i := range n {
		lp := fmt.Sprintf("u%d", i)
		addrs = append(addrs, lp+"@rep.test")
		if i%4 != 3 {
			boxes[lp] = mailworld.Exists
		}
	}
	e := startWorld(t, mailworld.Options{Latency: 10 * time.Millisecond},
		mailworld.Domain{Name: "rep.test", Mailboxes: boxes, ReputationDelay: time.Second, ReputationAfter: 2})
	return e, addrs
}

// repRun probes addrs at rep.test with the egress identities of mod and
// returns the simulated time the list took, every verdict checked.
func repRun(t *testing.T, e *env, addrs []string, mod func(*Config)) (time.Duration, *Prober) {
	t.Helper()
	p := e.prober(func(c *Config) { mod(c); c.CommandTimeout = 5 * time.Minute })
	res := make([]Result, len(addrs))
	t0 := time.Now()
	if err := p.ProbeBatch(ctxTimeout(t, time.Hour), "rep.test", e.mx("rep.test"), addrs, res); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	// The sessions' QUITs may still be on their way when the verdicts
	// are in: once the bubble is idle the host has read them (and
	// counted the replies it holds back), whatever the scheduling.
	synctest.Wait()
	for i, r := range res {
		if truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
			t.Errorf("%s: %+v", addrs[i], r)
		}
	}
	return took, p
}

// A host that slows every reply to a client address by 1s once it sent
// 2 unknown recipients, met for the first time: 48 addresses, 12 of them
// unknown. The engine learns the delay and the threshold from reply
// latencies; with three egress identities (SOCKS5 proxies on addresses
// of their own) the two it has not used yet each send the host 2 unknown
// recipients without a delay, and once all are spent the rest goes out
// in six sessions side by side (two an identity): 11.23s, every
// identity having sent 4. With one identity, whose first session tells
// the reputation from a per-transaction throttle by a late RSET and from
// a per-session budget by a late EHLO in the next, the rest shares its
// two sessions: 30.12s.
func TestReputationLearnt(t *testing.T) {
	for _, tc := range []struct {
		proxies int
		took    time.Duration
	}{
		{0, 30120 * time.Millisecond},
		{1, 30120 * time.Millisecond},
		{3, 11230 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%d proxies", tc.proxies), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, addrs := repWorld(t, 48)
				ips, mod := []string{"127.0.0.1"}, func(*Config) {}
				if tc.proxies > 0 {
					ips, mod = egressProxies(t, e, tc.proxies)
				}
				took, p := repRun(t, e, addrs, mod)
				hs := hostStats(e, "mx1.rep.test")
				t.Logf("took %v, host %+v", took, hs)
				if took != tc.took {
					t.Errorf("the list took %v, want %v", took, tc.took)
				}
				if hs.MaxConcurrent > 2*len(ips) {
					t.Errorf("%d sessions at once, want at most 2 an identity", hs.MaxConcurrent)
				}
				learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("rep.test")[0])
				if learnt.ReputationAfter != 2 || learnt.ReputationDelay != time.Second {
					t.Errorf("learnt %+v, want 2 unknown recipients and 1s", learnt)
				}
				total := 0
				for _, n := range hs.Unknowns {
					total += n
				}
				if total != 12 || len(hs.Unknowns) != len(ips) {
					t.Errorf("unknown recipients by client %v, want 12 over %d", hs.Unknowns, len(ips))
				}
				for _, ip := range ips {
					if n := hs.Unknowns[ip]; n != 12/len(ips) {
						t.Errorf("%s sent %d unknown recipients, want %d (by client: %v)", ip, n, 12/len(ips), hs.Unknowns)
					}
				}
			})
		})
	}
}

// The same host known from before (its reputation learnt, as a list's
// history gives it), with 20 addresses of which 5 are unknown (and the
// catch-all probe, a sixth): three identities each send it 2 unknown
// recipients, one session after another, and none meets a delay but on
// its QUIT (after the list's last verdict): 210ms. One identity meets the
// delay from its second unknown recipient on: 12.1s.
func TestReputationKnown(t *testing.T) {
	for _, tc := range []struct {
		proxies int
		took    time.Duration
		slowed  int // replies the host held back (QUITs' too)
	}{
		{1, 12100 * time.Millisecond, 24},
		{3, 210 * time.Millisecond, 3},
	} {
		t.Run(fmt.Sprintf("%d proxies", tc.proxies), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, addrs := repWorld(t, 20)
				ips, route := egressProxies(t, e, tc.proxies)
				mem := NewHostMemory(10, time.Hour, nil)
				mem.Learn(e.w.MXAddrs("rep.test")[0], HostState{Answered: true, ReputationAfter: 2, ReputationDelay: time.Second})
				took, _ := repRun(t, e, addrs, func(c *Config) { route(c); c.HostMemory = mem })
				hs := hostStats(e, "mx1.rep.test")
				t.Logf("took %v, host %+v", took, hs)
				if took != tc.took || hs.Slowed != tc.slowed {
					t.Errorf("the list took %v with %d replies held back, want %v and %d", took, hs.Slowed, tc.took, tc.slowed)
				}
				for _, ip := range ips {
					if n := hs.Unknowns[ip]; tc.proxies > 1 && n != 2 {
						t.Errorf("%s sent %d unknown recipients, want 2 (by client: %v)", ip, n, hs.Unknowns)
					}
				}
			})
		})
	}
}

// A host's reputation goes to the fleet and back with its other learnt
// limits, so that every process sharing Config.Learnt knows it.
func TestReputationSharedWithFleet(t *testing.T) {
	s := HostState{Answered: true, RejectsPerTransaction: 3, ReputationAfter: 2, ReputationDelay: time.Second}
	if got := fromFleet(toFleet(s)); got != s {
		t.Fatalf("through the fleet: %+v, want %+v", got, s)
	}
	if m := s.Merge(HostState{ReputationAfter: 3, ReputationDelay: 2 * time.Second}); m.ReputationAfter != 2 || m.ReputationDelay != 2*time.Second {
		t.Fatalf("merged %+v: want the fewer unknown recipients and the longer delay", m)
	}
}

// repStart reads the threshold from how late a window came: 2s late
// with replies after 0, 1 and 2 unknown recipients is a 1s delay from
// the second on; lateness too small for the replies after any is none
// of a reputation's.
func TestRepStart(t *testing.T) {
	for _, tc := range []struct {
		before []int
		late   time.Duration
		want   int
	}{
		{[]int{0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2}, 2 * time.Second, 2},
		{[]int{0, 1, 1, 1, 1}, 4 * time.Second, 1},
		{[]int{2, 2, 2, 2}, 4 * time.Second, 2}, // all after the window's start
		{[]int{0, 0, 0}, 3 * time.Second, 0},
	} {
		if got := repStart(tc.before, tc.late); got != tc.want {
			t.Errorf("repStart(%v, %v) = %d, want %d", tc.before, tc.late, got, tc.want)
		}
	}
}

// A process that knows the host's reputation (its HostMemory) but not
// that its identity is already spent there (an earlier run spent it)
// reads the slow EHLO of its first session as that, not as the host's
// usual round trip: it goes straight to sessions side by side (15.05s;
// 20.1s when it took that EHLO for the host's usual round trip and kept
// to a room the identity no longer had).
func TestReputationRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, addrs := repWorld(t, 20)
		_, first := repRun(t, e, addrs, func(*Config) {})
		mem := first.cfg.HostMemory
		simtime.Advance(time.Minute) // the first run's sessions are over
		took, _ := repRun(t, e, addrs, func(c *Config) { c.HostMemory = mem })
		hs := hostStats(e, "mx1.rep.test")
		t.Logf("took %v, host %+v", took, hs)
		if took != 15050*time.Millisecond {
			t.Errorf("the second run took %v, want 15.05s", took)
		}
	})
}
