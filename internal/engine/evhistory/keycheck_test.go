package evhistory

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// logBuffer is a log a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// proc is one process's history in a key check test.
type proc struct {
	h   *History
	log *logBuffer
}

func openProc(t *testing.T, url string, secret []byte, clk *testClock) proc {
	t.Helper()
	lb := &logBuffer{}
	h, err := Open(context.Background(), url, Options{TTLs: DefaultTTLs(), Secret: secret, Now: clk.Now, Log: lb.logger()})
	if err != nil {
		t.Fatal(err)
	}
	return proc{h, lb}
}

var otherSecret = []byte("another-key-0123456789")

// Issue 30, item 8, against the real Redis and PostgreSQL: the store
// loses its data mid-run (FLUSH, emptied tables). With one key, the next
// check of a running process finds its fingerprint gone, says so (log,
// history_key_lost) and publishes it again. A process started meanwhile
// with another key (a rotated or mistyped Secret) takes the empty store;
// the running processes' next check finds that key, reports it (log at
// error, history_key_mismatches, Health) and stops reading and writing,
// so no address is kept under two keys unsaid. Once the old processes
// are gone and their lease ran out, the new key takes over.
func TestKeyCheckAfterStoreLoss(t *testing.T) {
	for _, name := range []string{"redis", "postgres"} {
		mk := backends(t)[name]
		t.Run(name+"/same key", func(t *testing.T) {
			be := mk(t)
			clk := &testClock{t: time.Now()}
			p1, p2 := openProc(t, be.url, testSecret, clk), openProc(t, be.url, testSecret, clk)
			defer p1.h.Close()
			defer p2.h.Close()
			record(t, p1.h, "ann@example.test")
			if !found(t, p2.h, "ann@example.test") {
				t.Fatal("a second process with the same key does not see the verdict")
			}
			be.flush(t)
			clk.Add(DefaultKeyCheckEvery)
			if found(t, p1.h, "ann@example.test") {
				t.Error("a verdict survived the flush")
			}
			if st := p1.h.Stats(); st.KeyLost != 1 || st.KeyMismatches != 0 {
				t.Errorf("stats %+v: want the lost fingerprint counted once", st)
			}
			if !strings.Contains(p1.log.String(), "level=WARN") || !strings.Contains(p1.log.String(), "gone from its store") {
				t.Errorf("no warning of the lost store:\n%s", p1.log)
			}
			record(t, p1.h, "ann@example.test")
			if !found(t, p2.h, "ann@example.test") || p2.h.Stats().KeyMismatches != 0 {
				t.Error("after the fingerprint was published again, the processes do not share the history")
			}
		})
		t.Run(name+"/another key", func(t *testing.T) {
			be := mk(t)
			clk := &testClock{t: time.Now()}
			p1, p2 := openProc(t, be.url, testSecret, clk), openProc(t, be.url, testSecret, clk)
			record(t, p1.h, "ann@example.test")
			be.flush(t)
			p3 := openProc(t, be.url, otherSecret, clk) // started after the loss
			defer p3.h.Close()
			if ok, _ := p3.h.Health(); !ok {
				t.Fatal("the new process found a mismatch on an empty store")
			}
			record(t, p3.h, "ann@example.test")
			before := len(be.dump(t))
			clk.Add(DefaultKeyCheckEvery)
			for _, p := range []proc{p1, p2} {
				err := p.h.Record(context.Background(), acme, []verify.NewVerdict{{Mailbox: "bob@example.test", Code: verify.CodeDeliverable}})
				if !errors.Is(err, ErrKeyMismatch) {
					t.Errorf("an old-key process wrote: %v", err)
				}
				if _, err := p.h.Lookup(context.Background(), acme, []string{"ann@example.test"}, nil); !errors.Is(err, ErrKeyMismatch) {
					t.Errorf("an old-key process read: %v", err)
				}
				if st := p.h.Stats(); st.KeyMismatches != 2 {
					t.Errorf("stats %+v: want the two refused calls counted", st)
				}
				ok, detail := p.h.Health()
				if ok || !strings.Contains(detail, p3.h.Fingerprint()) || !strings.Contains(detail, p.h.Fingerprint()) {
					t.Errorf("health %v %q: want the mismatch, naming both keys", ok, detail)
				}
				if l := p.log.String(); strings.Count(l, "level=ERROR") != 1 || !strings.Contains(l, "key mismatch") {
					t.Errorf("want one error logged:\n%s", l)
				}
			}
			if after := len(be.dump(t)); after != before {
				t.Errorf("the store grew from %d to %d bytes after the mismatch", before, after)
			}
			// The old processes stop; their lease runs out; the new key
			// holds the store, and a restarted process with it agrees.
			p1.h.Close()
			p2.h.Close()
			be.expireKey(t)
			clk.Add(DefaultKeyCheckEvery)
			if !found(t, p3.h, "ann@example.test") {
				t.Error("the new key's process lost its verdict")
			}
			p4 := openProc(t, be.url, otherSecret, clk)
			defer p4.h.Close()
			if ok, _ := p4.h.Health(); !ok || !found(t, p4.h, "ann@example.test") {
				t.Error("a process restarted with the new key does not share its history")
			}
		})
	}
}

// A mismatched process's engine probes every address: it never answers
// from, nor writes to, a history kept under another key.
func TestEngineProbesOnKeyMismatch(t *testing.T) {
	ctx := context.Background()
	url := boltBackend(t).url
	st := mustBolt(t, url)
	owner, err := New(st, otherSecret, Options{TTLs: DefaultTTLs()})
	if err != nil {
		t.Fatal(err)
	}
	record(t, owner, "ann@example.test")
	h, err := New(st, testSecret, Options{TTLs: DefaultTTLs()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ck := &checker{answer: map[string]verify.Code{"ann@example.test": verify.CodeDeliverable}}
	e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}}
	for range 2 {
		r := e.Verify(ctx, "ann@example.test", verify.Options{SMTP: true, Tenant: acme})
		if r.FromHistory || r.Code != verify.CodeDeliverable || len(ck.take()) != 1 {
			t.Errorf("with a mismatched key: %+v", r)
		}
	}
	if s := h.Stats(); s.Recorded != 0 || s.KeyMismatches != 4 || s.Errors != 4 || h.lastCheck.IsZero() {
		t.Errorf("stats %+v: want nothing recorded, the 4 calls refused and counted (after one check)", s)
	}
}

func record(t *testing.T, h *History, box string) {
	t.Helper()
	if err := h.Record(context.Background(), acme, []verify.NewVerdict{{Mailbox: box, Code: verify.CodeDeliverable}}); err != nil {
		t.Fatal(err)
	}
}

func found(t *testing.T, h *History, box string) bool {
	t.Helper()
	got, err := h.Lookup(context.Background(), acme, []string{box}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got[0].Code != 0
}

// flakyStore is a store whose key claims fail while down, counted.
type flakyStore struct {
	Store
	mu     sync.Mutex
	down   bool
	claims int
}

func (s *flakyStore) ClaimKey(ctx context.Context, fp []byte, lease time.Duration) ([]byte, bool, error) {
	s.mu.Lock()
	s.claims++
	down := s.down
	s.mu.Unlock()
	if down {
		return nil, false, errors.New("connection refused")
	}
	return s.Store.ClaimKey(ctx, fp, lease)
}

// With the store away at start, calls do not queue behind key checks: one
// is tried, then none for keyRetry (the calls fail at once, and probe);
// once the store answers, the next due try checks the key and the history
// is used.
func TestKeyCheckRetriesWhileStoreAway(t *testing.T) {
	ctx := context.Background()
	st := &flakyStore{Store: mustBolt(t, boltBackend(t).url), down: true}
	clk := &testClock{t: time.Now()}
	h, err := New(st, testSecret, Options{TTLs: DefaultTTLs(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for range 10 {
		if _, err := h.Lookup(ctx, acme, []string{"ann@example.test"}, nil); err == nil {
			t.Fatal("a lookup succeeded before the key was checked")
		}
	}
	if st.claims != 1 {
		t.Errorf("%d key checks for 10 calls with the store away, want 1", st.claims)
	}
	st.mu.Lock()
	st.down = false
	st.mu.Unlock()
	clk.Add(keyRetry)
	record(t, h, "ann@example.test")
	if !found(t, h, "ann@example.test") || st.claims != 2 {
		t.Errorf("after the store came back: %d checks, verdict found %v", st.claims, found(t, h, "ann@example.test"))
	}
}
