package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/realmta"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// The mail world runs in a child process (this binary with -world-child) so
// that the CPU the servers spend answering a verifier is measured apart from
// the verifier's own CPU, and so that every verifier meets a fresh world
// (greylisting memory, connection counters).

// worldHello is the child's first line on stdout.
type worldHello struct {
	DNS        string   `json:"dns"`
	Port       int      `json:"port"`
	Truth      []string `json:"truth"`           // GroundTruth per address
	Underlying []string `json:"underlying"`      // UnderlyingTruth per address
	Shape      []string `json:"shape,omitempty"` // real world: the serving host's kind, or the DNS shape, per address
	Err        string   `json:"err,omitempty"`
}

// worldReport is the child's answer to "stats".
type worldReport struct {
	Stats   mailworld.WorldStats `json:"stats"`
	Real    *realmta.Counts      `json:"real,omitempty"` // real world: the servers' log counts
	CPUSecs float64              `json:"cpu_secs"`       // user+system since the last "stats"
}

// runWorldChild serves the generated world until stdin closes.
func runWorldChild(g gen, port int) {
	if g.real() {
		runRealWorldChild(g, port)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	doms, addrs := g.generate()
	out := json.NewEncoder(os.Stdout)
	w, err := mailworld.Start(ctx, doms, mailworld.Options{SMTPPort: port, LoopbackBase: g.loopback})
	if err != nil {
		_ = out.Encode(worldHello{Err: err.Error()})
		os.Exit(1)
	}
	defer w.Close()
	h := worldHello{DNS: w.DNSAddr(), Port: w.SMTPPort(), Truth: make([]string, len(addrs)), Underlying: make([]string, len(addrs))}
	for i, a := range addrs {
		h.Truth[i], h.Underlying[i] = w.RowTruth(a)
	}
	if err := out.Encode(h); err != nil {
		os.Exit(1)
	}
	last := cputime.Self().Seconds()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "stats" {
			now := cputime.Self().Seconds()
			_ = out.Encode(worldReport{Stats: w.Stats(), CPUSecs: now - last})
			last = now
		}
	}
}

// runRealWorldChild serves realmta's world (real Postfix, postgrey, Exim
// and NSD, their CPU read from /proc) until stdin closes, then stops the
// daemons.
func runRealWorldChild(g gen, port int) {
	out := json.NewEncoder(os.Stdout)
	w, addrs := g.generateReal()
	delay := g.greylist
	if delay <= 0 {
		delay = time.Second
	}
	r, err := realmta.Start(w, realmta.Options{Port: port, GreylistDelay: delay})
	if err != nil {
		_ = out.Encode(worldHello{Err: err.Error()})
		os.Exit(1)
	}
	defer r.Close()
	h := worldHello{DNS: r.DNSAddr(), Port: r.SMTPPort()}
	for _, a := range addrs {
		t := r.Truth(a)
		shape := t.Kind
		switch {
		case t.Host == "":
			shape = string(t.Shape)
		case t.Shape == realmta.ShapeAOnly:
			shape += " (A only)"
		}
		h.Truth, h.Underlying, h.Shape = append(h.Truth, t.Verdict), append(h.Underlying, t.Underlying), append(h.Shape, shape)
	}
	if err := out.Encode(h); err != nil {
		return
	}
	last := r.CPU()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "stats" {
			c, err := r.Counts()
			if err != nil {
				log.Printf("real world: %v", err)
			}
			now := r.CPU()
			_ = out.Encode(worldReport{Real: &c, CPUSecs: (now - last).Seconds()})
			last = now
		}
	}
}

// worldProc is a running child world.
type worldProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	dec   *json.Decoder
	hello worldHello
}

func startWorld(g gen, port int) (*worldProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"-world-child", "-port", strconv.Itoa(port)}, g.args()...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &worldProc{cmd: cmd, in: in, dec: json.NewDecoder(outp)}
	if err := p.dec.Decode(&p.hello); err != nil {
		p.stop()
		return nil, fmt.Errorf("world child: %w", err)
	}
	if p.hello.Err != "" {
		p.stop()
		return nil, fmt.Errorf("world child: %s", p.hello.Err)
	}
	return p, nil
}

func (p *worldProc) report() (worldReport, error) {
	var r worldReport
	if _, err := io.WriteString(p.in, "stats\n"); err != nil {
		return r, err
	}
	err := p.dec.Decode(&r)
	return r, err
}

func (p *worldProc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // a real world stops its daemons first
		_ = p.cmd.Process.Kill() // our own child, by its pid
		<-done
	}
}

// The process-wide resolver: net.DefaultResolver is replaced so that every
// lookup of the standard library (AfterShip's net.LookupMX and the host
// lookups of its net.DialTimeout) goes to the current world's DNS server and
// nowhere else.
var (
	resolverMu     sync.Mutex
	resolverTarget string
	resolverDials  atomic.Int64
)

func setResolverTarget(addr string) {
	resolverMu.Lock()
	resolverTarget = addr
	resolverMu.Unlock()
}

func installResolver() {
	net.DefaultResolver = &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			resolverMu.Lock()
			target := resolverTarget
			resolverMu.Unlock()
			if target == "" {
				return nil, fmt.Errorf("compare: DNS disabled outside a run")
			}
			if err := loopbackOnly(target); err != nil {
				return nil, err
			}
			resolverDials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, target)
		},
	}
}

func loopbackOnly(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("compare: refusing non-loopback address %s", hostport)
	}
	return nil
}
