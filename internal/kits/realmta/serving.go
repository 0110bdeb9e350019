package realmta

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// probeMark is the argument of the NOOP a readiness probe sends: sendmail's
// traffic log names no client address, so sendmailCounts finds the probe's
// session by it.
const probeMark = "realmta-readiness-probe"

// probeAddr is the source address of the kit's readiness probes (see
// waitGreeting): an address of the world's own that no client of a test
// uses, so that the logs' counts leave the probes out (Counts) and no
// host's per-client limits (anvil, ratecontrol, Haraka's limit and karma,
// postscreen's cache) count them against a test's client.
func (r *Running) probeAddr() netip.Addr { return r.opt.addr(0, 25) }

// greets reports whether h answers a connection with a greeting once it
// serves: not a Tarpit or HangUp host (they never say a word, by design).
func greets(h Host) bool { return h.Tarpit == 0 && h.HangUp == 0 }

// greetingAddrs are the addresses of s's hosts that greet.
func (r *Running) greetingAddrs(s Software) []netip.Addr {
	var out []netip.Addr
	for _, h := range r.World.Hosts {
		if h.Software == s && greets(h) {
			out = append(out, r.hostAddr[h.Name])
		}
	}
	return out
}

// waitServing waits, within timeout, until p listens on every address of
// addrs (waitListening, which makes no connection) and then answers a
// connection at each of greet with its greeting (waitGreeting).
func (r *Running) waitServing(p *proc, addrs, greet []netip.Addr, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if err := waitListening(p, addrs, r.port, timeout); err != nil {
		return err
	}
	return r.waitGreeting(p, greet, deadline)
}

// waitGreeting waits until the SMTP daemon p answers a connection at each
// of addrs with its greeting (a line beginning 220), failing early when p
// exits and at deadline. A daemon that listens does not yet serve: under
// load an Exim daemon that had bound its sockets accepted its first
// connection 10 s later, after the engine's 5 s greeting timeout, and a
// test's first case failed against it. One probe a host, from probeAddr:
// it reads the greeting; after a one-line one it says NOOP probeMark and
// QUIT; after a "220-" line (postscreen's pregreet test may hold the rest
// back for seconds) it hangs up without a word.
func (r *Running) waitGreeting(p *proc, addrs []netip.Addr, deadline time.Time) error {
	for _, a := range addrs {
		for {
			err := r.probe(a, deadline)
			if err == nil {
				break
			}
			if p != nil && p.exited() {
				return fmt.Errorf("realmta: %s exited before greeting on %s:%d: %v: %s", p.name, a, r.port, err, p.tail())
			}
			if !time.Now().Before(deadline) {
				msg := ""
				if p != nil {
					msg = p.tail()
				}
				return fmt.Errorf("realmta: no greeting on %s:%d by the start deadline (%v): %v: %s", a, r.port, startWait, err, msg)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// probe connects to a from probeAddr and waits (until deadline) for the
// greeting.
func (r *Running) probe(a netip.Addr, deadline time.Time) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: r.probeAddr().AsSlice()}, Deadline: deadline}
	c, err := d.Dial("tcp4", netip.AddrPortFrom(a, uint16(r.port)).String())
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("no greeting: %w", err)
	}
	if !strings.HasPrefix(line, "220") {
		return fmt.Errorf("greeting %q", strings.TrimSpace(line))
	}
	if len(line) < 4 || line[3] != ' ' {
		return nil // "220-": hang up, saying nothing
	}
	for _, cmd := range []string{"NOOP " + probeMark, "QUIT"} {
		if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
			return nil // it greeted: serving
		}
		for {
			l, err := br.ReadString('\n')
			if err != nil || len(l) < 4 || l[3] != '-' {
				break
			}
		}
	}
	return nil
}
