// Command apiload is a small HTTP load generator for local benchmarks of
// the REST API. It sends GET requests to one URL (or to the URLs of a file,
// in turn) from C concurrent workers over keep-alive connections until N
// requests have been sent or the duration has passed, whichever comes
// first, then prints the throughput, the count of each status code and
// latency percentiles.
//
//	go run ./hack/apiload -url http://127.0.0.1:8080/v5/list/1 \
//	    -H 'api_key: acme-validation-key-0001' -c 32 -n 200000 -d 10s
//	go run ./hack/apiload -urls urls.txt -c 16 -d 10s
//
// With -urls, the file holds one URL per line (blank lines and lines
// starting with # are skipped); the URLs are dealt out to the workers, each
// of which cycles through its share, so every URL is requested about as
// often as the others.
//
// It only talks to the local machine: a URL whose host is not a loopback
// address (127.0.0.0/8, ::1 or localhost) is refused with exit status 2,
// every connection is checked to go to a loopback address once the name is
// resolved, proxies from the environment are ignored and redirects are not
// followed. A run never lasts longer than 10 minutes.
//
// Latencies (request sent until the body is read) are counted in a
// histogram with buckets about 1.5 % wide, so memory stays fixed however
// long the run; percentiles are the upper edge of their bucket, the maximum
// is exact.
//
// Exit status: 0 when at least one request got a response, 1 when none
// did, 2 for bad flags or a refused URL.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxDuration bounds every run.
const maxDuration = 10 * time.Minute

// headers collects repeated -H 'Name: value' flags.
type headers [][2]string

func (h *headers) String() string { return fmt.Sprint(*h) }

func (h *headers) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("header %q is not in the form 'Name: value'", v)
	}
	*h = append(*h, [2]string{name, strings.TrimSpace(value)})
	return nil
}

func main() {
	var (
		target   = flag.String("url", "", "URL to GET (loopback hosts only)")
		urlFile  = flag.String("urls", "", "file of URLs to GET in turn, one a line (instead of -url)")
		n        = flag.Int64("n", 100000, "number of requests to send; 0 for no limit (the duration still applies)")
		conc     = flag.Int("c", 8, "concurrent workers, one keep-alive connection each")
		dur      = flag.Duration("d", 10*time.Second, "maximum duration of the run (at most 10m)")
		timeout  = flag.Duration("timeout", 10*time.Second, "timeout of one request")
		insecure = flag.Bool("k", false, "for https: do not verify the server certificate")
		hdrs     headers
	)
	flag.Var(&hdrs, "H", "request header 'Name: value' (repeatable)")
	flag.Parse()

	targets, err := loadTargets(*target, *urlFile)
	if err != nil {
		fail(err)
	}
	u := targets[0]
	switch {
	case *n < 0:
		fail(errors.New("-n must be 0 or more"))
	case *conc < 1 || *conc > 10000:
		fail(errors.New("-c must be from 1 to 10000"))
	case len(targets) > 1 && len(targets) < *conc:
		fail(fmt.Errorf("-urls: %d URLs for %d workers; give at least one a worker", len(targets), *conc))
	case *dur <= 0 || *dur > maxDuration:
		fail(fmt.Errorf("-d must be more than 0 and at most %s", maxDuration))
	case *timeout <= 0:
		fail(errors.New("-timeout must be more than 0"))
	}

	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: loopbackOnly}
	tr := &http.Transport{
		Proxy: nil, // never through a proxy, whatever the environment says
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        *conc,
		MaxIdleConnsPerHost: *conc, // keep every worker's connection open between requests
		// At most one connection per worker: without this a request that
		// starts before the previous response's connection is back in the
		// idle pool dials a spare one.
		MaxConnsPerHost:    *conc,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: *insecure}, //nolint:gosec // opt-in, for local servers
	}
	client := &http.Client{
		Transport:     tr,
		Timeout:       *timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	// Stop on the deadline, on -n requests or on Ctrl-C; in-flight requests finish.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	deadline := time.Now().Add(*dur)
	done := func() bool { return ctx.Err() != nil || time.Now().After(deadline) }
	var issued atomic.Int64

	results := make([]*worker, *conc)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range results {
		w := &worker{codes: map[int]int64{}}
		results[i] = w
		// This worker's share of the URLs: i, i+conc, ...
		var reqs []*http.Request
		for j := i % len(targets); j < len(targets); j += *conc {
			reqs = append(reqs, newRequest(context.WithoutCancel(ctx), targets[j], hdrs))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !done() && (*n == 0 || issued.Add(1) <= *n); k++ {
				w.do(client, reqs[k%len(reqs)])
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	tr.CloseIdleConnections()

	total := &worker{codes: map[int]int64{}}
	for _, w := range results {
		total.merge(w)
	}
	why := "duration"
	switch {
	case ctx.Err() != nil:
		why = "interrupted"
	case *n > 0 && total.ok+total.errors >= *n:
		why = "request count"
	}
	report(os.Stdout, u, len(targets), *conc, dials.Load(), elapsed, why, total)
	if total.ok == 0 {
		os.Exit(1)
	}
}

// loadTargets returns the -url target, or the URLs of the -urls file, each
// checked (exactly one of the two must be given).
func loadTargets(target, file string) ([]*url.URL, error) {
	switch {
	case target != "" && file != "":
		return nil, errors.New("give -url or -urls, not both")
	case file == "":
		u, err := checkURL(target)
		if err != nil {
			return nil, err
		}
		return []*url.URL{u}, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-urls: %w", err)
	}
	var out []*url.URL
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		u, err := checkURL(line)
		if err != nil {
			return nil, fmt.Errorf("-urls %s line %d: %w", file, n+1, err)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-urls %s: no URLs", file)
	}
	return out, nil
}

// newRequest builds the GET of u with the -H headers.
func newRequest(ctx context.Context, u *url.URL, hdrs headers) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		fail(err)
	}
	for _, h := range hdrs {
		if strings.EqualFold(h[0], "Host") {
			req.Host = h[1]
			continue
		}
		req.Header[h[0]] = append(req.Header[h[0]], h[1]) // the name as given
	}
	return req
}

// checkURL parses the target and refuses anything but http(s) to a
// loopback host.
func checkURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("-url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("-url %q: only http and https URLs are supported", raw)
	}
	if !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("-url %q: host %q is not a loopback address (127.0.0.0/8, ::1, localhost); apiload only loads the local machine", raw, u.Hostname())
	}
	return u, nil
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly runs before each connect, with the resolved address: so a
// name that resolves elsewhere cannot take the load off the machine.
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
	fmt.Fprintln(os.Stderr, "apiload:", err)
	os.Exit(2)
}

// worker holds one worker's counts; merged after the run, so no locking.
type worker struct {
	ok, errors int64
	codes      map[int]int64
	firstErr   string
	hist       histogram
}

func (w *worker) do(c *http.Client, req *http.Request) {
	t0 := time.Now()
	resp, err := c.Do(req)
	if err == nil {
		// Read the body to the end so the connection is reused.
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		w.errors++
		if w.firstErr == "" {
			w.firstErr = err.Error()
		}
		time.Sleep(10 * time.Millisecond) // do not spin on a server that is down
		return
	}
	w.hist.add(time.Since(t0))
	w.ok++
	w.codes[resp.StatusCode]++
}

func (w *worker) merge(o *worker) {
	w.ok += o.ok
	w.errors += o.errors
	for c, k := range o.codes {
		w.codes[c] += k
	}
	if w.firstErr == "" {
		w.firstErr = o.firstErr
	}
	w.hist.merge(&o.hist)
}

func report(out io.Writer, u *url.URL, nURLs, conc int, dials int64, elapsed time.Duration, why string, t *worker) {
	codes := make([]int, 0, len(t.codes))
	for c := range t.codes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var cs []string
	for _, c := range codes {
		cs = append(cs, fmt.Sprintf("%d=%d", c, t.codes[c]))
	}
	if nURLs > 1 {
		fmt.Fprintf(out, "target:       GET %s and %d more URLs\n", u.Redacted(), nURLs-1)
	} else {
		fmt.Fprintf(out, "target:       GET %s\n", u.Redacted())
	}
	fmt.Fprintf(out, "workers:      %d (connections opened: %d)\n", conc, dials)
	fmt.Fprintf(out, "requests:     %d in %.2fs (stopped by %s)\n", t.ok+t.errors, elapsed.Seconds(), why)
	fmt.Fprintf(out, "requests/s:   %.0f\n", float64(t.ok)/elapsed.Seconds())
	fmt.Fprintf(out, "status codes: %s\n", strings.Join(cs, " "))
	if t.errors > 0 {
		fmt.Fprintf(out, "errors:       %d (first: %s)\n", t.errors, t.firstErr)
	} else {
		fmt.Fprintf(out, "errors:       0\n")
	}
	if t.ok > 0 {
		h := &t.hist
		fmt.Fprintf(out, "latency:      p50=%s p90=%s p99=%s max=%s mean=%s\n",
			h.quantile(0.50), h.quantile(0.90), h.quantile(0.99), h.max, time.Duration(h.sum/h.n))
	}
}

// histogram counts latencies in microseconds: exactly below 128 µs, then in
// 64 buckets per power of two (each at most 1/64 of its value wide).
type histogram struct {
	counts [128 + 64*40]int64
	n, sum int64 // count and sum in nanoseconds
	max    time.Duration
}

func bucket(us uint64) int {
	if us < 128 {
		return int(us)
	}
	shift := bits.Len64(us) - 7 // us>>shift is in [64, 127]
	return 128 + (shift-1)*64 + int(us>>shift) - 64
}

// upper returns the largest latency bucket i holds.
func upper(i int) time.Duration {
	if i < 128 {
		return time.Duration(i+1) * time.Microsecond
	}
	shift := (i-128)/64 + 1
	lo := uint64((i-128)%64+64) << shift
	return time.Duration(lo+1<<shift) * time.Microsecond
}

func (h *histogram) add(d time.Duration) {
	i := bucket(uint64(d / time.Microsecond))
	if i >= len(h.counts) {
		i = len(h.counts) - 1
	}
	h.counts[i]++
	h.n++
	h.sum += int64(d)
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the upper edge of the bucket holding quantile q, capped
// at the exact maximum.
func (h *histogram) quantile(q float64) time.Duration {
	rank := int64(q*float64(h.n) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return min(upper(i), h.max)
		}
	}
	return h.max
}
