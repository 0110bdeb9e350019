package realmta

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Running is a started world.
type Running struct {
	World World

	opt       Options
	bins      Binaries
	dir       string
	port      int
	dnsAddr   netip.AddrPort
	greyAddr  netip.AddrPort
	redisAddr netip.AddrPort // Haraka's plugins' redis-server
	silent    *silentServer  // HangUp hosts' policy server, nil without one
	hostAddr  map[string]netip.Addr
	hostIdx   map[string]int

	owner       *os.File // owner.lock, held while this process lives
	postfix     *proc
	postfixConf string
	procsMu     sync.Mutex // procs, while the hosts start side by side
	procs       []*proc    // NSD, postgrey, Exim, redis, sendmail, Haraka

	closeOnce sync.Once
	closeErr  error
}

// Start installs the software if needed (Ensure), writes the
// configurations and starts the daemons the world needs; an SMTP daemon
// is up once it answers a connection with its greeting (waitGreeting), not
// once it listens, except a Tarpit or HangUp host's, which never greets.
// On error, whatever it started is stopped. With Options.Port 0 it retries on other
// ports when a daemon could not bind.
func Start(w World, opt Options) (*Running, error) {
	netGiven := opt.Net.IsValid()
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if err := w.validate(opt.Zone); err != nil {
		return nil, err
	}
	bins, err := Ensure()
	if err != nil {
		return nil, err
	}
	reapStale(bins)
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 && !netGiven {
			opt.Net = defaultNet()
		}
		r, err := start(w, opt, bins)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
		// A daemon that could not bind: another port, or (with a fixed
		// port) other addresses.
		if !strings.Contains(err.Error(), "listen") || opt.Port != 0 && netGiven {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func start(w World, opt Options, bins Binaries) (_ *Running, err error) {
	r := &Running{World: w, opt: opt, bins: bins, hostAddr: map[string]netip.Addr{}, hostIdx: map[string]int{}}
	r.dir = opt.Dir
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "realmta-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	if r.owner, err = lockOwner(r.dir); err != nil {
		return nil, fmt.Errorf("realmta: %s is in use: %w", r.dir, err)
	}
	// The daemons drop privileges and must reach their files below it.
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = r.Close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(r.dir, "log"), 0o755); err != nil {
		return nil, err
	}
	var smtpAddrs []netip.Addr
	for i, h := range w.Hosts {
		a := opt.addr(byte(1+i/250), byte(1+i%250))
		r.hostAddr[h.Name], r.hostIdx[h.Name] = a, i
		smtpAddrs = append(smtpAddrs, a)
	}
	if r.port = opt.Port; r.port == 0 {
		if r.port, err = freePort(smtpAddrs, false); err != nil {
			return nil, err
		}
	}
	dnsIP, greyIP := opt.addr(0, 53), opt.addr(0, 23)
	dnsPort, err := freePort([]netip.Addr{dnsIP}, true)
	if err != nil {
		return nil, err
	}
	greyPort, err := freePort([]netip.Addr{greyIP}, false)
	if err != nil {
		return nil, err
	}
	r.dnsAddr = netip.AddrPortFrom(dnsIP, uint16(dnsPort))
	r.greyAddr = netip.AddrPortFrom(greyIP, uint16(greyPort))

	if err := r.startNSD(); err != nil {
		return nil, err
	}
	var grey, exim, postfix, hangup, haraka bool
	for _, h := range w.Hosts {
		grey = grey || h.Greylist
		exim = exim || h.Software == Exim
		postfix = postfix || h.Software == Postfix
		hangup = hangup || h.HangUp > 0
		haraka = haraka || h.Software == Haraka
	}
	if hangup {
		if r.silent, err = startSilent(opt.addr(0, 24)); err != nil {
			return nil, err
		}
	}
	if grey {
		if err := r.startPostgrey(); err != nil {
			return nil, err
		}
	}
	if exim {
		conf, err := r.writeExim()
		if err != nil {
			return nil, err
		}
		if err := r.startExim(conf); err != nil {
			return nil, err
		}
	}
	if haraka {
		redisIP := opt.addr(0, 63)
		redisPort, err := freePort([]netip.Addr{redisIP}, false)
		if err != nil {
			return nil, err
		}
		r.redisAddr = netip.AddrPortFrom(redisIP, uint16(redisPort))
		if err := r.startRedis(); err != nil {
			return nil, err
		}
	}
	// The sendmail and Haraka daemons (one a host) and Postfix start side
	// by side: a Haraka takes about a second of Node.js start-up, Postfix
	// half a second, and none waits for another.
	var wg sync.WaitGroup
	errs := make([]error, len(w.Hosts)+1)
	for i, h := range w.Hosts {
		switch h.Software {
		case Sendmail:
			wg.Go(func() { errs[i] = r.startSendmail(i, h) })
		case Haraka:
			wg.Go(func() { errs[i] = r.startHaraka(i, h) })
		}
	}
	if postfix {
		wg.Go(func() {
			conf, err := r.writePostfix()
			if err == nil {
				err = r.startPostfix(conf)
			}
			errs[len(w.Hosts)] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// addProc records a started daemon (Close stops it); the hosts' daemons
// start side by side.
func (r *Running) addProc(p *proc) {
	r.procsMu.Lock()
	defer r.procsMu.Unlock()
	r.procs = append(r.procs, p)
}

// StartT starts the world for a test (Require first: fails under CI=true
// and skips elsewhere when the software is missing) and stops it when the
// test ends; a failed test gets the tails of the servers' logs.
func StartT(t testing.TB, w World, opt Options) *Running {
	t.Helper()
	Require(t)
	r, err := Start(w, opt)
	if err != nil {
		t.Fatal(err)
	}
	r.CloseAtEnd(t)
	return r
}

// CloseAtEnd stops the world when the test ends (StopT), as StartT does.
// For a world started with Start (after Require), e.g. one of several
// started side by side from other goroutines: it may be called from any
// goroutine.
func (r *Running) CloseAtEnd(t testing.TB) {
	t.Cleanup(func() { r.StopT(t) })
}

// StopT closes the world; a failed test gets the tails of the servers'
// logs first. Several worlds may stop side by side.
func (r *Running) StopT(t testing.TB) {
	if t.Failed() {
		for _, f := range append(r.logNames(), "nsd.log") {
			if s := r.LogTail(f, 3000); s != "" {
				t.Logf("--- %s %s (tail) ---\n%s", r.dir, f, s)
			}
		}
	}
	t0 := time.Now()
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	t.Logf("realmta: world %s closed in %v", r.dir, time.Since(t0).Round(10*time.Millisecond))
}

// DNSAddr is the DNS server's host:port (UDP and TCP), for
// `--dns-server`.
func (r *Running) DNSAddr() string { return r.dnsAddr.String() }

// SMTPPort is every host's SMTP port.
func (r *Running) SMTPPort() int { return r.port }

// HostAddr is the host's ip:port.
func (r *Running) HostAddr(name string) string {
	a, ok := r.hostAddr[name]
	if !ok {
		return ""
	}
	return netip.AddrPortFrom(a, uint16(r.port)).String()
}

// Dir is the world's directory (configurations, queues, logs).
func (r *Running) Dir() string { return r.dir }

// LogTail is the end of one of the world's logs ("postfix.log",
// "exim/mainlog", "postgrey.log", "nsd.log", "sendmail-<i>.traffic" and
// "haraka-<i>.log" for the i-th host of World.Hosts).
func (r *Running) LogTail(name string, n int64) string {
	return tailFile(r.logPath(name), n)
}

func (r *Running) logPath(name string) string {
	if name == "exim/mainlog" {
		return filepath.Join(r.dir, "exim", "log", "mainlog")
	}
	return filepath.Join(r.dir, "log", name)
}

// Truth is World.Truth.
func (r *Running) Truth(address string) Truth { return r.World.Truth(address) }

// CPU is the CPU time the world's daemons used so far (live processes and
// the children they reaped), read from /proc.
func (r *Running) CPU() time.Duration {
	var pids []int
	for _, p := range append([]*proc{r.postfix}, r.procs...) {
		if p != nil && !p.exited() {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return treeCPU(pids)
}

func (r *Running) host(name string) (Host, bool) {
	i, ok := r.hostIdx[name]
	if !ok {
		return Host{}, false
	}
	return r.World.Hosts[i], true
}

func (r *Running) addrsOf(s Software) []netip.Addr {
	var out []netip.Addr
	for _, h := range r.World.Hosts {
		if h.Software == s {
			out = append(out, r.hostAddr[h.Name])
		}
	}
	return out
}

// Close stops every daemon and removes the world's directory (queues,
// databases, logs) unless Options.KeepDir. It reports a daemon that would
// not stop.
func (r *Running) Close() error {
	r.closeOnce.Do(func() {
		r.stopPostfix()
		if r.silent != nil {
			r.silent.close()
		}
		for i := len(r.procs) - 1; i >= 0; i-- {
			r.procs[i].terminate(5 * time.Second)
		}
		var errs []error
		for _, p := range append([]*proc{r.postfix}, r.procs...) {
			if p != nil && !p.exited() {
				errs = append(errs, fmt.Errorf("realmta: %s (pid %d) did not stop", p.name, p.cmd.Process.Pid))
			}
		}
		if len(errs) == 0 && r.dir != "" {
			if r.opt.KeepDir {
				errs = append(errs, os.WriteFile(filepath.Join(r.dir, closedMark), nil, 0o644))
			} else {
				errs = append(errs, os.RemoveAll(r.dir))
			}
		}
		if r.owner != nil {
			r.owner.Close()
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
