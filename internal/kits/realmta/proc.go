package realmta

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a daemon this package started, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  string // file with its stdout and stderr
	done chan struct{}
	err  error // Wait's result, once done is closed
}

func startProc(name, outFile string, argv ...string) (*proc, error) {
	return startProcAttr(name, outFile, nil, argv...)
}

// startProcAttr is startProc with attr adjusting the process's attributes
// (e.g. namespaces) before it starts.
func startProcAttr(name, outFile string, attr func(*syscall.SysProcAttr), argv ...string) (*proc, error) {
	f, err := os.OpenFile(outFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
	// Its own group, so that terminate reaches its children; killed if
	// this process dies first (Postfix's master, in its own session, is
	// left to reapStale).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if attr != nil {
		attr(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("realmta: start %s: %w", name, err)
	}
	f.Close()
	p := &proc{name: name, cmd: cmd, out: outFile, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to end.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// terminate sends SIGTERM to the process group, then SIGKILL after grace.
// Only our own child's group is signalled.
func (p *proc) terminate(grace time.Duration) {
	if p.exited() {
		return
	}
	pg := p.cmd.Process.Pid
	_ = syscall.Kill(-pg, syscall.SIGTERM)
	if p.wait(grace) {
		_ = syscall.Kill(-pg, syscall.SIGKILL) // session children left behind
		return
	}
	_ = syscall.Kill(-pg, syscall.SIGKILL)
	p.wait(5 * time.Second)
}

// tail is the end of the process's output, for error messages.
func (p *proc) tail() string {
	return tailFile(p.out, 2000)
}

func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, 0)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return strings.TrimSpace(string(b[:k]))
}

// listening reports whether a TCP socket listens on addr:port, read from
// /proc/net/tcp so that no connection is made (a probe connection would
// count against anvil's limits and postscreen's cache).
func listening(addr netip.Addr, port int) (bool, error) {
	b := addr.As4()
	// /proc/net/tcp prints the address as a host-order (little-endian
	// here) 32-bit word in hex, the port big-endian.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], port)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 3 && fs[1] == want && fs[3] == "0A" {
			return true, nil
		}
	}
	return false, sc.Err()
}

// startWait bounds a daemon's start-up: it fails early when the daemon
// exits, so the bound is for one that hangs. Start-ups are CPU work (a
// Haraka's Node.js 1.7 s, Postfix's 0.4 s), and on a 2-core machine other
// work loaded 30 deep a Haraka took 35 s to listen: 30 s failed the
// world.
const startWait = 2 * time.Minute

// waitListening waits until every address listens on port, failing early
// when p (if any) exits.
func waitListening(p *proc, addrs []netip.Addr, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := append([]netip.Addr(nil), addrs...)
	for len(pending) > 0 {
		ok, err := listening(pending[0], port)
		if err != nil {
			return err
		}
		if ok {
			pending = pending[1:]
			continue
		}
		if p != nil && p.exited() {
			return fmt.Errorf("realmta: %s exited before listening on %s:%d: %s", p.name, pending[0], port, p.tail())
		}
		if time.Now().After(deadline) {
			msg := ""
			if p != nil {
				msg = p.tail()
			}
			return fmt.Errorf("realmta: nothing listens on %s:%d after %v: %s", pending[0], port, timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// freePort finds a port free for TCP (and UDP when udp) on every address.
// Another process may take it before the daemon binds it; Start retries.
func freePort(addrs []netip.Addr, udp bool) (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(40000)
		if portFree(addrs, port, udp) {
			return port, nil
		}
	}
	return 0, errors.New("realmta: no free port found")
}

func portFree(addrs []netip.Addr, port int, udp bool) bool {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, uint16(port)).String()
		l, err := net.Listen("tcp4", ap)
		if err != nil {
			return false
		}
		closers = append(closers, l.Close)
		if udp {
			pc, err := net.ListenPacket("udp4", ap)
			if err != nil {
				return false
			}
			closers = append(closers, pc.Close)
		}
	}
	return true
}

// treeCPU is the CPU time (user+system, with reaped children's) of the
// processes rooted at pids, read from /proc.
func treeCPU(pids []int) time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	type st struct {
		ppid  int
		ticks int64
	}
	all := map[int]st{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid ... utime(14)
		// stime(15) cutime(16) cstime(17), counted from 1 over the line.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var t int64
		for _, k := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[k], 10, 64)
			t += v
		}
		all[pid] = st{ppid, t}
	}
	in := map[int]bool{}
	for _, p := range pids {
		in[p] = true
	}
	var ticks int64
	for pid, s := range all {
		for p, n := pid, 0; p > 1 && n < 64; p, n = all[p].ppid, n+1 {
			if in[p] {
				ticks += s.ticks
				break
			}
		}
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / hz
}
