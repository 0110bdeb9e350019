package callback

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// receiver is a loopback HTTP server that records what reaches it, down to
// TCP connections, so tests can assert that blocked deliveries sent nothing.
type receiver struct {
	*httptest.Server
	conns atomic.Int64

	mu       sync.Mutex
	requests []recordedRequest
}

type recordedRequest struct {
	Method, Path string
	Header       http.Header
	Body         string
}

func newReceiver(t *testing.T, handler http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewUnstartedServer(r.wrap(handler))
	r.Config.ConnState = r.countConns
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) wrap(handler http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, recordedRequest{req.Method, req.URL.Path, req.Header.Clone(), string(body)})
		r.mu.Unlock()
		if handler != nil {
			handler(w, req)
		}
	})
}

func (r *receiver) countConns(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		r.conns.Add(1)
	}
}

func (r *receiver) recorded() []recordedRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedRequest(nil), r.requests...)
}

func (r *receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
	r.conns.Store(0)
}

func (r *receiver) assertUntouched(t *testing.T) {
	t.Helper()
	if n := r.conns.Load(); n != 0 {
		t.Errorf("receiver saw %d connections, want 0", n)
	}
	if n := len(r.recorded()); n != 0 {
		t.Errorf("receiver saw %d requests, want 0", n)
	}
}

// port returns the receiver's port.
func (r *receiver) port(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func loopbackPolicy(t *testing.T) Policy {
	t.Helper()
	p, err := ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

var testPayload = Payload{ListID: 42, Status: "Completed", Name: "my-list"}

func TestDeliverSuccess(t *testing.T) {
	for _, code := range []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
			c := loopbackPolicy(t).Client(5 * time.Second)

			if err := Deliver(context.Background(), c, r.URL+"/hooks/done?token=s3cret", testPayload); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			reqs := r.recorded()
			if len(reqs) != 1 {
				t.Fatalf("receiver got %d requests, want exactly 1", len(reqs))
			}
			got := reqs[0]
			if got.Method != http.MethodPost {
				t.Errorf("method = %q, want POST", got.Method)
			}
			if got.Path != "/hooks/done" {
				t.Errorf("path = %q, want /hooks/done", got.Path)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if ua := got.Header.Get("User-Agent"); ua != "emaildata-callback/1" {
				t.Errorf("User-Agent = %q, want emaildata-callback/1", ua)
			}
			if want := `{"list_id":42,"status":"Completed","name":"my-list"}`; got.Body != want {
				t.Errorf("body = %s, want %s", got.Body, want)
			}
		})
	}
}

func TestDeliverStatusErrors(t *testing.T) {
	tests := []struct {
		code          int
		body          string
		retryAfter    string
		wantPermanent bool
		wantMsg       string
		wantRetry     time.Duration
	}{
		{code: 500, body: "database on fire\n", wantPermanent: false,
			wantMsg: `callback receiver responded with HTTP 500 Internal Server Error: "database on fire"`},
		{code: 502, wantPermanent: false, wantMsg: "callback receiver responded with HTTP 502 Bad Gateway"},
		{code: 503, retryAfter: "120", wantPermanent: false, wantRetry: 2 * time.Minute,
			wantMsg: "callback receiver responded with HTTP 503 Service Unavailable"},
		{code: 408, wantPermanent: false, wantMsg: "callback receiver responded with HTTP 408 Request Timeout"},
		{code: 429, retryAfter: "7", wantPermanent: false, wantRetry: 7 * time.Second,
			wantMsg: "callback receiver responded with HTTP 429 Too Many Requests"},
		{code: 404, body: "no such hook", wantPermanent: true,
			wantMsg: `callback receiver responded with HTTP 404 Not Found: "no such hook"`},
		{code: 400, wantPermanent: true, wantMsg: "callback receiver responded with HTTP 400 Bad Request"},
		{code: 401, wantPermanent: true, wantMsg: "callback receiver responded with HTTP 401 Unauthorized"},
		{code: 410, wantPermanent: true, wantMsg: "callback receiver responded with HTTP 410 Gone"},
	}
	c := loopbackPolicy(t).Client(5 * time.Second)
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.code)
				io.WriteString(w, tt.body)
			})
			err := Deliver(context.Background(), c, r.URL, testPayload)
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Deliver error = %v (%T), want *StatusError", err, err)
			}
			if se.StatusCode != tt.code {
				t.Errorf("StatusCode = %d, want %d", se.StatusCode, tt.code)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("error = %q, want %q", err.Error(), tt.wantMsg)
			}
			if got := IsPermanent(err); got != tt.wantPermanent {
				t.Errorf("IsPermanent = %v, want %v", got, tt.wantPermanent)
			}
			if se.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", se.RetryAfter, tt.wantRetry)
			}
			if n := len(r.recorded()); n != 1 {
				t.Errorf("receiver got %d requests, want exactly 1 (Deliver must not retry)", n)
			}
		})
	}
}

func TestDeliverBoundsResponse(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x\x00\x1b[31m<html>\n", 64))
		for range 1 << 12 { // ~4 MiB, far more than Deliver may read
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c := loopbackPolicy(t).Client(5 * time.Second)
	err := Deliver(context.Background(), c, r.URL, testPayload)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 {
		t.Fatalf("Deliver error = %v, want 500 StatusError", err)
	}
	if n := len(se.Snippet); n > maxSnippet+len("…") {
		t.Errorf("snippet is %d bytes, want at most %d", n, maxSnippet+len("…"))
	}
	if strings.ContainsAny(se.Snippet, "\x00\x1b\n") {
		t.Errorf("snippet contains control characters: %q", se.Snippet)
	}
	if want := "x [31m<html> x [31m<html>"; !strings.HasPrefix(se.Snippet, want) {
		t.Errorf("snippet = %q, want prefix %q", se.Snippet, want)
	}
	if !strings.HasSuffix(se.Snippet, "…") {
		t.Errorf("snippet = %q, want truncation marker", se.Snippet)
	}
	if len(err.Error()) > 300 {
		t.Errorf("error message is %d bytes, want short", len(err.Error()))
	}
}

func TestDeliverBlockedByDefaultPolicy(t *testing.T) {
	r := newReceiver(t, nil)
	c := Policy{}.Client(5 * time.Second)

	// Deliver does not repeat ValidateURL's address check; the dialer alone
	// must refuse.
	err := Deliver(context.Background(), c, r.URL+"/cb?token=s3cret", testPayload)
	if got, want := errString(err), "blocked: destination 127.0.0.1 is not allowed"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	var be *BlockedError
	if !errors.As(err, &be) {
		t.Errorf("error %T is not a *BlockedError", err)
	}
	if !IsPermanent(err) {
		t.Error("IsPermanent(blocked) = false, want true")
	}
	r.assertUntouched(t)
}

func TestDeliverIPv6Loopback(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	r := &receiver{}
	r.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: r.wrap(nil), ConnState: r.countConns}}
	r.Start()
	t.Cleanup(r.Close)

	err = Deliver(context.Background(), Policy{}.Client(5*time.Second), r.URL, testPayload)
	if got, want := errString(err), "blocked: destination ::1 is not allowed"; got != want {
		t.Errorf("default policy: error = %q, want %q", got, want)
	}
	r.assertUntouched(t)

	if err := Deliver(context.Background(), loopbackPolicy(t).Client(5*time.Second), r.URL, testPayload); err != nil {
		t.Errorf("Deliver with ::1 allowed: %v", err)
	}
}

func TestDeliverAllowedByAllowCIDRs(t *testing.T) {
	r := newReceiver(t, nil)
	p, err := ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ValidateURL(r.URL); err != nil {
		t.Fatalf("ValidateURL(%q) with 127.0.0.0/8 allowed: %v", r.URL, err)
	}
	if err := Deliver(context.Background(), p.Client(5*time.Second), r.URL, testPayload); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := len(r.recorded()); n != 1 {
		t.Errorf("receiver got %d requests, want 1", n)
	}

	// Opening a different range does not open loopback.
	other, err := ParsePolicy("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	r.reset()
	err = Deliver(context.Background(), other.Client(5*time.Second), r.URL, testPayload)
	if got, want := errString(err), "blocked: destination 127.0.0.1 is not allowed"; got != want {
		t.Errorf("with 10.0.0.0/8 allowed: error = %q, want %q", got, want)
	}
	r.assertUntouched(t)
}

func TestDeliverDoesNotFollowRedirects(t *testing.T) {
	target := newReceiver(t, nil)
	redirector := newReceiver(t, func(w http.ResponseWriter, req *http.Request) {
		code, _ := strconv.Atoi(req.URL.Query().Get("code"))
		http.Redirect(w, req, target.URL+"/elsewhere", code)
	})
	c := loopbackPolicy(t).Client(5 * time.Second)

	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			err := Deliver(context.Background(), c, redirector.URL+"/?code="+strconv.Itoa(code), testPayload)
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != code {
				t.Fatalf("Deliver error = %v, want StatusError %d", err, code)
			}
			want := "callback receiver responded with HTTP " + strconv.Itoa(code) + " " + http.StatusText(code) + " (redirects are not followed)"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error = %q, want prefix %q", err.Error(), want)
			}
			if !IsPermanent(err) {
				t.Error("IsPermanent(redirect) = false, want true")
			}
		})
	}
	target.assertUntouched(t)
}

// TestDeliverHostnameResolvingToLoopback is the DNS-rebinding scenario: a
// name passes submission-time validation (which does not resolve) but
// resolves to loopback when the callback is finally sent.
func TestDeliverHostnameResolvingToLoopback(t *testing.T) {
	if !hostsFileMapsLocalhost() {
		// Without an /etc/hosts entry "localhost" might be sent to a real
		// DNS server; tests must not send traffic off the machine.
		t.Skip("/etc/hosts does not map localhost")
	}
	r := newReceiver(t, nil)
	u := "http://localhost:" + r.port(t) + "/cb"

	var p Policy
	if err := p.ValidateURL(u); err != nil {
		t.Fatalf("ValidateURL(%q) = %v; want nil (names are not resolved at submission)", u, err)
	}
	err := Deliver(context.Background(), p.Client(5*time.Second), u, testPayload)
	var be *BlockedError
	if !errors.As(err, &be) {
		t.Fatalf("Deliver(%q) error = %v (%T), want *BlockedError", u, err, err)
	}
	if !be.Addr.IsLoopback() {
		t.Errorf("blocked address = %s, want a loopback address", be.Addr)
	}
	if want := "blocked: destination " + be.Addr.String() + " is not allowed"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if !IsPermanent(err) {
		t.Error("IsPermanent = false, want true")
	}
	r.assertUntouched(t)
}

func hostsFileMapsLocalhost() bool {
	f, err := os.Open("/etc/hosts")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line, _, _ := strings.Cut(s.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		for _, name := range fields[1:] {
			if name == "localhost" {
				return true
			}
		}
	}
	return false
}

// TestDialGuardCatchesResolvedNames resolves names through a fake DNS server
// on loopback that answers 127.0.0.1 / ::1 for everything. It shows that the
// dial-time guard blocks whatever a name turns into — rebinding names and
// numeric-looking hosts alike — and, with loopback allowed, that the same
// resolution path really reaches the receiver (so the blocks are the policy
// at work, not a resolution failure).
func TestDialGuardCatchesResolvedNames(t *testing.T) {
	dns := startFakeDNS(t)
	r := newReceiver(t, nil)
	port := r.port(t)

	blocked := Policy{}.newClient(5*time.Second, dns.resolver())
	allowed := loopbackPolicy(t).newClient(5*time.Second, dns.resolver())
	hosts := []string{
		"rebind.attacker.test",
		"0x7f.1",     // hex + short form of 127.0.0.1
		"0x7f000001", // hex 127.0.0.1
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			r.reset()
			u := "http://" + host + ":" + port + "/cb"
			before := dns.queries.Load()

			// Use the client directly, skipping Deliver's syntax checks:
			// the dialer must hold even without them.
			err := post(blocked, u)
			var be *BlockedError
			if !errors.As(err, &be) || !be.Addr.IsLoopback() {
				t.Fatalf("request to %s error = %v, want *BlockedError for a loopback address", u, err)
			}
			if dns.queries.Load() == before {
				t.Errorf("fake DNS saw no query for %s; resolution was not exercised", host)
			}
			r.assertUntouched(t)

			if err := post(allowed, u); err != nil {
				t.Fatalf("request to %s with loopback allowed: %v", u, err)
			}
			if n := len(r.recorded()); n != 1 {
				t.Errorf("with loopback allowed: receiver got %d requests, want 1", n)
			}
			allowed.CloseIdleConnections()
		})
	}

	// Go's own resolver refuses all-numeric names such as "2130706433"
	// outright (glibc's would turn them into 127.0.0.1, which the guard
	// then blocks as above). Either way nothing reaches the receiver.
	r.reset()
	if err := post(blocked, "http://2130706433:"+port+"/cb"); err == nil {
		t.Error("request to http://2130706433 succeeded, want an error")
	}
	r.assertUntouched(t)

	// Through Deliver, the rebinding name is blocked at dial time...
	err := Deliver(context.Background(), blocked, "http://rebind.attacker.test:"+port+"/cb", testPayload)
	if !strings.HasPrefix(errString(err), "blocked: destination ") || !IsPermanent(err) {
		t.Errorf("Deliver via rebinding name: error = %v, want permanent blocked error", err)
	}
	// ...while numeric shorthands are refused before any lookup.
	before := dns.queries.Load()
	err = Deliver(context.Background(), blocked, "http://0x7f.1:"+port+"/cb", testPayload)
	if want := `callback_url host "0x7f.1" is not a valid host name or canonical IP address`; errString(err) != want {
		t.Errorf("Deliver via numeric host: error = %q, want %q", errString(err), want)
	}
	if dns.queries.Load() != before {
		t.Error("Deliver looked up a numeric shorthand host; want it refused before resolution")
	}
	r.assertUntouched(t)
}

// post sends a bare POST with c and reports a transport error or non-200.
func post(c *http.Client, u string) error {
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func TestDeliverTransportErrorsAreRetryable(t *testing.T) {
	p := loopbackPolicy(t)

	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		err = Deliver(context.Background(), p.Client(5*time.Second), "http://"+addr+"/cb?token=s3cret", testPayload)
		var te *TransportError
		if !errors.As(err, &te) {
			t.Fatalf("error = %v (%T), want *TransportError", err, err)
		}
		if IsPermanent(err) {
			t.Error("IsPermanent(connection refused) = true, want false")
		}
		if !strings.HasPrefix(err.Error(), "callback delivery failed: ") || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("error = %q, want a connection-refused delivery failure", err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error %q leaks the URL query", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		r := newReceiver(t, func(_ http.ResponseWriter, req *http.Request) {
			select {
			case <-release:
			case <-req.Context().Done():
			}
		})
		defer close(release)
		start := time.Now()
		err := Deliver(context.Background(), p.Client(200*time.Millisecond), r.URL, testPayload)
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("Deliver took %v, want about the 200ms timeout", elapsed)
		}
		var te *TransportError
		if !errors.As(err, &te) || IsPermanent(err) {
			t.Fatalf("error = %v, want retryable *TransportError", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("error = %v, want a timeout", err)
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		r := newReceiver(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := Deliver(ctx, p.Client(5*time.Second), r.URL, testPayload)
		if !errors.Is(err, context.Canceled) || IsPermanent(err) {
			t.Errorf("error = %v, want retryable context.Canceled", err)
		}
		r.assertUntouched(t)
	})
}

func TestDeliverInvalidURL(t *testing.T) {
	c := loopbackPolicy(t).Client(time.Second)
	tests := []struct{ url, want string }{
		{"", "callback_url must not be empty"},
		{"ftp://127.0.0.1/", "callback_url must use http or https"},
		{"http://u:p@127.0.0.1/", "callback_url must not contain user info (credentials)"},
		{"http://0x7f.1/", `callback_url host "0x7f.1" is not a valid host name or canonical IP address`},
	}
	for _, tt := range tests {
		err := Deliver(context.Background(), c, tt.url, testPayload)
		if errString(err) != tt.want || !IsPermanent(err) {
			t.Errorf("Deliver(%q) = %v (permanent=%v), want permanent %q", tt.url, err, IsPermanent(err), tt.want)
		}
	}
}

func TestDeliverNilClientUsesDefaultPolicy(t *testing.T) {
	r := newReceiver(t, nil)
	err := Deliver(context.Background(), nil, r.URL, testPayload)
	if got, want := errString(err), "blocked: destination 127.0.0.1 is not allowed"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	r.assertUntouched(t)
}

func TestClientConfiguration(t *testing.T) {
	c := Policy{}.Client(time.Second)
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("Transport is %T, want *http.Transport", c.Transport)
	}
	if tr.Proxy != nil {
		t.Error("Transport.Proxy is set; environment proxies must be ignored")
	}
	if c.Timeout != time.Second {
		t.Errorf("Timeout = %v, want 1s", c.Timeout)
	}
	if c.CheckRedirect == nil {
		t.Error("CheckRedirect is nil; redirects would be followed")
	}
	if got := (Policy{}).Client(0).Timeout; got != DefaultTimeout {
		t.Errorf("Client(0).Timeout = %v, want %v", got, DefaultTimeout)
	}
}

func TestIsPermanent(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("something"), false},
		{"blocked", &BlockedError{}, true},
		{"301", &StatusError{StatusCode: 301}, true},
		{"403", &StatusError{StatusCode: 403}, true},
		{"422", &StatusError{StatusCode: 422}, true},
		{"408", &StatusError{StatusCode: 408}, false},
		{"429", &StatusError{StatusCode: 429}, false},
		{"500", &StatusError{StatusCode: 500}, false},
		{"504", &StatusError{StatusCode: 504}, false},
		{"transport", &TransportError{Err: context.DeadlineExceeded}, false},
		{"invalid URL", Policy{}.ValidateURL("ftp://x"), true},
		{"wrapped blocked", errors.Join(errors.New("wrapped"), &BlockedError{}), true},
	}
	for _, tt := range tests {
		if got := IsPermanent(tt.err); got != tt.want {
			t.Errorf("%s: IsPermanent(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"30", 30 * time.Second},
		{" 30 ", 30 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{"99999999999999999999", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
