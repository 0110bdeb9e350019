package restapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// scriptedConn plays a client sending chunks, each after a pause, on the
// fake clock, with the kernel's read deadline: a chunk that would come
// after the deadline is not read; the Read fails at the deadline instead.
type scriptedConn struct {
	clock    *fakeClock
	chunks   []chunk
	deadline time.Time
	sets     []time.Time // every deadline set
}

type chunk struct {
	pause time.Duration // the client's pause before sending
	n     int
}

func (c *scriptedConn) setDeadline(t time.Time) error {
	c.deadline = t
	c.sets = append(c.sets, t)
	return nil
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	ch := &c.chunks[0]
	arrives := c.clock.now().Add(ch.pause)
	if !c.deadline.IsZero() && arrives.After(c.deadline) {
		ch.pause = arrives.Sub(c.deadline) // the rest of the pause is still to come
		c.clock.t = c.deadline
		return 0, fmt.Errorf("read tcp: %w", os.ErrDeadlineExceeded)
	}
	c.clock.t = arrives
	n := min(ch.n, len(p))
	ch.n -= n
	ch.pause = 0
	if ch.n == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func (c *scriptedConn) Close() error { return nil }

func repeat(times int, ch chunk) []chunk {
	out := make([]chunk, times)
	for i := range out {
		out[i] = ch
	}
	return out
}

// TestPacedBody drives a paced body with scripted clients on a fake clock:
// the deadline grows with the bytes received, so a client at the minimum
// rate is never cut however long it sends, while one sending a byte every
// 10 s is cut once its stall credit is spent.
func TestPacedBody(t *testing.T) {
	const minRate, stall = 1024, 30 * time.Second
	for _, tc := range []struct {
		name      string
		chunks    []chunk
		busy      time.Duration // the handler's time between reads (writing to the store)
		wantBytes int64
		wantCut   bool
		wantAt    time.Duration // when the read failed, from the start
	}{
		{name: "a byte every 10 s is cut after the stall", chunks: repeat(100, chunk{10 * time.Second, 1}),
			wantBytes: 3, wantCut: true, wantAt: 30*time.Second + 3*(time.Second/minRate)},
		{name: "nothing at all is cut at the stall", chunks: []chunk{{time.Hour, 1}}, wantCut: true, wantAt: stall},
		{name: "the minimum rate for an hour is never cut", chunks: repeat(3600, chunk{time.Second, minRate}), wantBytes: 3600 * minRate},
		{name: "a slow link: 2 KiB every second for 20 min", chunks: repeat(1200, chunk{time.Second, 2 * minRate}), wantBytes: 1200 * 2 * minRate},
		{name: "a fast burst banks the stall, no more: a 29 s pause passes",
			chunks: []chunk{{0, 10 << 20}, {29 * time.Second, 1}}, wantBytes: 10<<20 + 1},
		{name: "a fast burst banks the stall, no more: a 31 s pause is cut",
			chunks: []chunk{{0, 10 << 20}, {31 * time.Second, 1}}, wantBytes: 10 << 20, wantCut: true, wantAt: 30 * time.Second},
		{name: "the handler's own time is not the client's", chunks: repeat(10, chunk{time.Second, minRate}),
			busy: time.Minute, wantBytes: 10 * minRate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1e9, 0)}
			conn := &scriptedConn{clock: clock, chunks: tc.chunks}
			var ends []bool
			b := &pacedBody{body: conn, minRate: minRate, stall: stall, credit: stall, now: clock.now,
				setDeadline: conn.setDeadline, done: func(eof bool) { ends = append(ends, eof) }}
			start := clock.now()
			var readTime time.Duration
			buf := make([]byte, 32<<10)
			var err error
			for err == nil {
				before := clock.now()
				_, err = b.Read(buf)
				readTime += clock.now().Sub(before)
				clock.advance(tc.busy)
			}
			var slow *SlowBodyError
			cut := errors.As(err, &slow)
			if cut != tc.wantCut || (!cut && err != io.EOF) {
				t.Fatalf("err %v, want cut %v", err, tc.wantCut)
			}
			if b.received != tc.wantBytes {
				t.Errorf("received %d bytes, want %d", b.received, tc.wantBytes)
			}
			if cut {
				if slow.Received != tc.wantBytes || slow.MinRate != minRate || slow.Stall != stall {
					t.Errorf("error %+v", slow)
				}
				if readTime != tc.wantAt {
					t.Errorf("cut after %v of reading, want %v", readTime, tc.wantAt)
				}
				if _, again := b.Read(buf); !errors.As(again, &slow) {
					t.Errorf("a cut body read again: %v", again)
				}
			} else if last := conn.sets[len(conn.sets)-1]; !last.IsZero() {
				t.Errorf("the deadline is %v after the end of the body, want none (the server's background read would time out)", last.Sub(start))
			}
			if len(ends) == 0 || ends[0] != !tc.wantCut {
				t.Errorf("done calls %v, want first %v", ends, !tc.wantCut)
			}
		})
	}
}

// TestFailures: a token bucket per name, on an injected clock, that never
// lets try run past the limit, and that remembers a bounded number of names.
func TestFailures(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	f := newFailures[string](0.5, 3, 1000, clock.now)
	tries := 0
	fail := func() bool { tries++; return false }
	for i := range 3 {
		if ok, retry := f.guard("a", fail); ok || retry != 0 {
			t.Fatalf("failure %d: ok %v retry %v", i, ok, retry)
		}
	}
	if _, retry := f.guard("a", fail); retry != 2*time.Second || tries != 3 {
		t.Fatalf("4th: retry %v after %d tries, want 2s after 3", retry, tries)
	}
	if ok, retry := f.guard("b", func() bool { return true }); !ok || retry != 0 {
		t.Fatalf("another name: ok %v retry %v", ok, retry)
	}
	clock.advance(1500 * time.Millisecond)
	if _, retry := f.guard("a", fail); retry != 500*time.Millisecond {
		t.Fatalf("after 1.5 s: retry %v, want 0.5s", retry)
	}
	clock.advance(500 * time.Millisecond)
	if ok, retry := f.guard("a", func() bool { return true }); !ok || retry != 0 {
		t.Fatalf("after 2 s a right key passes: ok %v retry %v", ok, retry)
	}
	if _, retry := f.guard("a", fail); retry != 0 {
		t.Fatalf("the refilled failure: retry %v", retry)
	}
	if _, retry := f.guard("a", fail); retry != 2*time.Second {
		t.Fatalf("then none: retry %v", retry)
	}

	// A bounded memory: 100,000 names through a counter of 1,000.
	small := newFailures[netip.Addr](0.5, 3, 1000, clock.now)
	for i := range 100_000 {
		small.fail(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if n := small.len(); n != 1000 {
		t.Fatalf("remembers %d names, want 1000", n)
	}
	if newFailures[string](-1, 3, 10, clock.now) != nil {
		t.Fatal("a negative rate counts")
	}
}

func TestClientAddress(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		remote, xff string
		trusted     []netip.Prefix
		want        string
	}{
		{remote: "203.0.113.7:4242", want: "203.0.113.7"},
		{remote: "[2001:db8:1:2:3:4:5:6]:443", want: "2001:db8:1:2::"},
		{remote: "[::ffff:203.0.113.7]:1", want: "203.0.113.7"},
		{remote: "203.0.113.7:4242", xff: "198.51.100.1", want: "203.0.113.7"},                   // no trusted proxies: ignored
		{remote: "203.0.113.7:4242", xff: "198.51.100.1", trusted: trusted, want: "203.0.113.7"}, // the peer is not one
		{remote: "10.1.2.3:80", xff: "198.51.100.1", trusted: trusted, want: "198.51.100.1"},
		{remote: "10.1.2.3:80", xff: "192.0.2.9, 198.51.100.1, 10.9.9.9", trusted: trusted, want: "198.51.100.1"},
		{remote: "10.1.2.3:80", xff: "10.4.4.4", trusted: trusted, want: "10.4.4.4"},
		{remote: "10.1.2.3:80", xff: "192.0.2.9, bogus, 10.9.9.9", trusted: trusted, want: "10.9.9.9"},
		{remote: "[fd00::1]:80", xff: "2001:db8:aa:bb::1", trusted: trusted, want: "2001:db8:aa:bb::"},
		{remote: "10.1.2.3:80", trusted: trusted, want: "10.1.2.3"},
	} {
		r := httptest.NewRequest("GET", "/v5/ev", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := clientAddress(r, tc.trusted); got.String() != tc.want {
			t.Errorf("%s via %q: %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
}

func TestUploadSlots(t *testing.T) {
	u := newUploads(2, 3)
	r1, _, _ := u.acquire("k1", "acme")
	r2, _, _ := u.acquire("k1", "acme")
	if rel, full, limit := u.acquire("k1", "acme"); rel != nil || full != "key" || limit != 2 {
		t.Fatalf("third of one key: %v %q %d", rel != nil, full, limit)
	}
	r3, _, _ := u.acquire("k2", "acme")
	if rel, full, limit := u.acquire("k2", "acme"); rel != nil || full != "tenant" || limit != 3 {
		t.Fatalf("fourth of one tenant: %v %q %d", rel != nil, full, limit)
	}
	if rel, _, _ := u.acquire("k3", "globex"); rel == nil {
		t.Fatal("another tenant is refused")
	} else {
		rel()
	}
	r1()
	r1() // releasing twice frees one slot only
	if k, ten := u.inFlight("k1", "acme"); k != 1 || ten != 2 {
		t.Fatalf("in flight %d %d, want 1 2", k, ten)
	}
	r2()
	r3()
	if len(u.byKey) != 0 || len(u.byTenant) != 0 {
		t.Fatalf("entries left: %v %v", u.byKey, u.byTenant)
	}
}

// docs/rest-api.md's table of the api.throttle settings restates their
// defaults: each must be the Configuration's default (the one home of
// defaults), and every setting of the section has its row.
func TestREADMEThrottleFlags(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "rest-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfgv1.Default().API.Throttle)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	for k, v := range raw {
		switch v := v.(type) {
		case nil:
			defaults[k] = ""
		case []any:
			if len(v) == 0 {
				defaults[k] = ""
			} else {
				defaults[k] = fmt.Sprint(v...)
			}
		default:
			defaults[k] = fmt.Sprint(v)
		}
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		keys := strings.Split(strings.TrimSpace(cells[1]), ", ")
		if _, ours := defaults[strings.Trim(keys[0], "`")]; !ours {
			continue
		}
		vals := strings.Split(strings.TrimSpace(cells[2]), ", ")
		if len(vals) != len(keys) && !(len(keys) == 1 && vals[0] == "") {
			t.Errorf("docs/rest-api.md row %s has %d defaults", cells[1], len(vals))
			continue
		}
		for i, k := range keys {
			name := strings.Trim(k, "`")
			def, ok := defaults[name]
			if !ok {
				t.Errorf("docs/rest-api.md names %s, which is no api.throttle setting", k)
				continue
			}
			seen[name] = true
			if vals[i] != def {
				t.Errorf("docs/rest-api.md: %s defaults to %q, the Configuration to %q", k, vals[i], def)
			}
		}
	}
	for name := range defaults {
		if !seen[name] {
			t.Errorf("docs/rest-api.md's table of api.throttle lacks %s", name)
		}
	}
}

// sizeRecorder returns up to give bytes a read and records the buffers it
// was handed.
type sizeRecorder struct {
	give, left int
	sizes      []int
}

func (s *sizeRecorder) Read(p []byte) (int, error) {
	s.sizes = append(s.sizes, len(p))
	if s.left == 0 {
		return 0, io.EOF
	}
	n := min(s.give, len(p), s.left)
	s.left -= n
	return n, nil
}

// TestCopyUploadBuffer: a slow upload (a byte a read) is copied through
// the smallest buffer throughout; a fast one's buffer doubles up to the
// largest. The copy is whole either way.
func TestCopyUploadBuffer(t *testing.T) {
	for _, tc := range []struct {
		give, total, wantMax int
	}{
		{give: 1, total: 5000, wantMax: minUploadBuffer},
		{give: 1 << 20, total: 4 << 20, wantMax: maxUploadBuffer},
	} {
		r := &sizeRecorder{give: tc.give, left: tc.total}
		var out strings.Builder
		n, err := copyUpload(&out, r)
		if err != nil || n != int64(tc.total) || out.Len() != tc.total {
			t.Fatalf("give %d: copied %d (%d written), %v; want %d", tc.give, n, out.Len(), err, tc.total)
		}
		if got := slices.Max(r.sizes); got != tc.wantMax || r.sizes[0] != minUploadBuffer {
			t.Errorf("give %d: buffers from %d to %d, want from %d to %d", tc.give, r.sizes[0], got, minUploadBuffer, tc.wantMax)
		}
	}
}
