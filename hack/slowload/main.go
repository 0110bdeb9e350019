// Command slowload holds slow uploads open against a local API, as a
// slowloris client would, and measures what that costs the server: it
// opens -n connections, each a POST whose body it sends one byte every
// -every, and reports how the server answered them (and after how long),
// the server process's memory and open files (-pid) and, throughout, the
// latency of another client's requests (-probe).
//
//	go run ./hack/slowload -url 'http://127.0.0.1:8090/v5/list?service=email_validation' \
//	    -H 'api_key: attacker-key-0000000001' -n 1500 -every 10s -d 2m \
//	    -pid "$(pgrep -f /tmp/api)" -probe http://127.0.0.1:8090/v5/list/1 -probe-H 'api_key: other-tenant-key-01'
//
// With -keys FILE, connection i presents the i-th key of the file (one a
// line, in turn) in the api_key header, instead of -H's. With -reconnect,
// a connection the server answered or closed is opened again, as an
// attacker would, so -n stay open or being opened throughout.
//
// Like hack/apiload, it only talks to the local machine: URLs must name a
// loopback host, and every connection is checked to go to one. A run never
// lasts longer than 10 minutes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const maxDuration = 10 * time.Minute

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

type options struct {
	target        *url.URL
	headers       headers
	keys          []string
	n             int
	every         time.Duration
	contentLength int64
	ramp          time.Duration
	reconnect     bool
}

func main() {
	var o options
	var (
		target   = flag.String("url", "", "URL to POST slow bodies to (loopback hosts only)")
		keysFile = flag.String("keys", "", "file of API keys, one a line: connection i presents key i (in turn) in the api_key header")
		dur      = flag.Duration("d", time.Minute, "how long to run (at most 10m)")
		pid      = flag.Int("pid", 0, "the server's process ID: sample its memory (VmRSS, VmHWM) and open files every second")
		probe    = flag.String("probe", "", "URL another client GETs every -probe-every throughout (loopback hosts only)")
		probeEv  = flag.Duration("probe-every", 200*time.Millisecond, "pause between probe requests")
		ctype    = flag.String("content-type", "text/csv", "Content-Type of the slow bodies")
		probeH   headers
	)
	flag.Var(&o.headers, "H", "header 'Name: value' of the slow requests (repeatable)")
	flag.Var(&probeH, "probe-H", "header 'Name: value' of the probe requests (repeatable)")
	flag.IntVar(&o.n, "n", 1500, "slow uploads to hold open at once")
	flag.DurationVar(&o.every, "every", 10*time.Second, "pause between two bytes of a slow body")
	flag.Int64Var(&o.contentLength, "content-length", 1<<20, "Content-Length the slow requests declare")
	flag.DurationVar(&o.ramp, "ramp", 5*time.Second, "open the -n connections over this long")
	flag.BoolVar(&o.reconnect, "reconnect", false, "open a connection again once the server has answered or closed it")
	flag.Parse()

	var err error
	if o.target, err = checkURL(*target); err != nil {
		fail(err)
	}
	var probeURL *url.URL
	if *probe != "" {
		if probeURL, err = checkURL(*probe); err != nil {
			fail(err)
		}
	}
	if *keysFile != "" {
		if o.keys, err = readKeys(*keysFile); err != nil {
			fail(err)
		}
	}
	switch {
	case o.n < 1 || o.n > 20000:
		fail(errors.New("-n must be from 1 to 20000"))
	case *dur <= 0 || *dur > maxDuration:
		fail(fmt.Errorf("-d must be more than 0 and at most %s", maxDuration))
	case o.every <= 0:
		fail(errors.New("-every must be more than 0"))
	}
	o.headers = append(o.headers, "Content-Type: "+*ctype)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *dur)
	defer cancel()

	st := &stats{answers: map[string]int{}, start: time.Now()}
	var wg sync.WaitGroup
	if *pid > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); st.sample(ctx, *pid) }()
	}
	if probeURL != nil {
		wg.Add(1)
		go func() { defer wg.Done(); st.probe(ctx, probeURL, probeH, *probeEv) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); st.progress(ctx) }()
	for i := range o.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select { // spread the opens over the ramp
			case <-time.After(o.ramp * time.Duration(i) / time.Duration(o.n)):
			case <-ctx.Done():
				return
			}
			for {
				st.upload(ctx, &o, i)
				if !o.reconnect || ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	st.report(os.Stdout, &o)
}

// stats are the run's counts, shared by the goroutines.
type stats struct {
	start time.Time

	mu        sync.Mutex
	answers   map[string]int  // "408", "429", "closed", "error: ..."
	cutAfter  []time.Duration // how long the server let a slow body run before answering or closing
	probeLat  []time.Duration
	probeCode map[int]int
	probeErrs int
	rssPeak   int64 // kB
	hwm       int64 // kB
	fdsPeak   int
	rssFirst  int64
	fdsFirst  int

	open, held atomic.Int64 // connections open; of them, past the server's first answer-free second
}

func (s *stats) note(answer string, after time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[answer]++
	s.cutAfter = append(s.cutAfter, after)
}

// upload opens connection i and sends its body a byte every o.every until
// the server answers or closes, or ctx ends.
func (s *stats) upload(ctx context.Context, o *options, i int) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: loopbackOnly}
	conn, err := d.DialContext(ctx, "tcp", o.target.Host)
	if err != nil {
		if ctx.Err() == nil {
			s.note("dial error: "+errors.Unwrap(err).Error(), 0)
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	s.open.Add(1)
	defer s.open.Add(-1)
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", o.target.RequestURI(), o.target.Host, o.contentLength)
	for _, h := range o.headers {
		head.WriteString(h + "\r\n")
	}
	if len(o.keys) > 0 {
		head.WriteString("api_key: " + o.keys[i%len(o.keys)] + "\r\n")
	}
	head.WriteString("\r\n")
	start := time.Now()
	if _, err := io.WriteString(conn, head.String()); err != nil {
		s.note("closed", time.Since(start))
		return
	}
	answered := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- "closed"
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		answered <- strconv.Itoa(resp.StatusCode)
	}()
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	heldOnce := false
	for {
		select {
		case a := <-answered:
			s.note(a, time.Since(start))
			if heldOnce {
				s.held.Add(-1)
			}
			return
		case <-ctx.Done():
			if heldOnce {
				s.held.Add(-1)
			}
			return
		case <-tick.C:
			if !heldOnce {
				heldOnce = true
				s.held.Add(1)
			}
			if _, err := conn.Write([]byte{'a'}); err != nil {
				// The answer, if any, is still to be read.
				select {
				case a := <-answered:
					s.note(a, time.Since(start))
				case <-time.After(time.Second):
					s.note("closed", time.Since(start))
				}
				s.held.Add(-1)
				return
			}
		}
	}
}

// sample reads the server's memory and open files every second.
func (s *stats) sample(ctx context.Context, pid int) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		rss, hwm := procStatus(pid)
		fds := countFDs(pid)
		s.mu.Lock()
		if s.rssFirst == 0 {
			s.rssFirst, s.fdsFirst = rss, fds
		}
		s.rssPeak, s.hwm, s.fdsPeak = max(s.rssPeak, rss), max(s.hwm, hwm), max(s.fdsPeak, fds)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// progress prints a line every 5 s.
func (s *stats) progress(ctx context.Context) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		fmt.Printf("t=%3.0fs open=%d sending=%d rss=%.1fMiB fds=%d answers=%v probes=%d\n", time.Since(s.start).Seconds(),
			s.open.Load(), s.held.Load(), float64(s.rssPeak)/1024, s.fdsPeak, s.answers, len(s.probeLat))
		s.mu.Unlock()
	}
}

// probe GETs u every pause and records the latencies.
func (s *stats) probe(ctx context.Context, u *url.URL, hs headers, pause time.Duration) {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: loopbackOnly}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil}}
	s.probeCode = map[int]int{}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, u.String(), nil)
		for _, h := range hs {
			name, value, _ := strings.Cut(h, ":")
			req.Header[strings.TrimSpace(name)] = append(req.Header[strings.TrimSpace(name)], strings.TrimSpace(value))
		}
		t0 := time.Now()
		resp, err := cl.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		lat := time.Since(t0)
		s.mu.Lock()
		if err != nil {
			s.probeErrs++
		} else {
			s.probeLat = append(s.probeLat, lat)
			s.probeCode[resp.StatusCode]++
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (s *stats) report(out io.Writer, o *options) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(out, "target:        POST %s, %d connections, a byte every %s (reconnect %v)\n", o.target.Redacted(), o.n, o.every, o.reconnect)
	fmt.Fprintf(out, "answers:       %v\n", s.answers)
	if len(s.cutAfter) > 0 {
		slices.Sort(s.cutAfter)
		q := func(p float64) time.Duration {
			return s.cutAfter[int(p*float64(len(s.cutAfter)-1))].Round(time.Millisecond)
		}
		fmt.Fprintf(out, "answered after: min=%s p50=%s p99=%s max=%s\n", q(0), q(0.5), q(0.99), q(1))
	}
	if s.rssFirst > 0 {
		fmt.Fprintf(out, "server memory: VmRSS %.1f MiB at start, peak %.1f MiB (VmHWM %.1f MiB)\n",
			float64(s.rssFirst)/1024, float64(s.rssPeak)/1024, float64(s.hwm)/1024)
		fmt.Fprintf(out, "server files:  %d open at start, peak %d\n", s.fdsFirst, s.fdsPeak)
	}
	if len(s.probeLat) > 0 || s.probeErrs > 0 {
		slices.Sort(s.probeLat)
		q := func(p float64) time.Duration {
			if len(s.probeLat) == 0 {
				return 0
			}
			return s.probeLat[int(p*float64(len(s.probeLat)-1))].Round(10 * time.Microsecond)
		}
		fmt.Fprintf(out, "probe:         %d answered %v, %d errors; latency p50=%s p99=%s max=%s\n",
			len(s.probeLat), s.probeCode, s.probeErrs, q(0.5), q(0.99), q(1))
	}
}

// procStatus returns VmRSS and VmHWM of pid in kB.
func procStatus(pid int) (rss, hwm int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}

func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

func readKeys(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keys = append(keys, l)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("-keys %s: no keys", file)
	}
	return keys, nil
}

func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" || u.Scheme != "http" {
		return nil, fmt.Errorf("%q is not an http:// URL", raw)
	}
	ip := net.ParseIP(u.Hostname())
	if !strings.EqualFold(u.Hostname(), "localhost") && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%q: host %q is not a loopback address; slowload only loads the local machine", raw, u.Hostname())
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), "80")
	}
	return u, nil
}

// loopbackOnly runs before each connect, with the resolved address.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to connect to %s: not a loopback address", address)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "slowload:", err)
	os.Exit(2)
}
