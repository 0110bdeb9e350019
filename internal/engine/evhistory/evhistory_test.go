package evhistory

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// need fails under CI=true, else skips, when a service is missing.
func need(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not reachable (required under CI=true): %v", what, err)
	}
	t.Skipf("%s not reachable: %v", what, err)
}

// backend is one store under test and a way to read everything it holds
// (to check no address is stored in clear).
type backend struct {
	url  string
	dump func(t testing.TB) []byte
}

func redisBackend(t testing.TB) backend {
	rdb := redistest.Need(t)
	prefix := redistest.Prefix(t, rdb, "evhtest")
	keys := func() []string {
		ks, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		return ks
	}
	return backend{url: "redis://" + redistest.Addr + "/0?prefix=" + prefix, dump: func(t testing.TB) []byte {
		var b bytes.Buffer
		for _, k := range keys() {
			v, _ := rdb.Get(context.Background(), k).Bytes()
			b.WriteString(k)
			b.Write(v)
		}
		return b.Bytes()
	}}
}

func pgBackend(t testing.TB) backend {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	need(t, "PostgreSQL", err)
	table := "evh_test_" + randHex(5)
	t.Cleanup(func() {
		pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+`, `+table+`_secret`)
		pool.Close()
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return backend{url: url + sep + "table=" + table, dump: func(t testing.TB) []byte {
		var b bytes.Buffer
		rows, err := pool.Query(context.Background(), `SELECT key, code::text, checked_at::text FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k []byte
			var c, at string
			if err := rows.Scan(&k, &c, &at); err != nil {
				t.Fatal(err)
			}
			b.Write(k)
			b.WriteString(c + at)
		}
		return b.Bytes()
	}}
}

func boltBackend(t testing.TB) backend {
	path := filepath.Join(t.TempDir(), "history.db")
	return backend{url: "bolt://" + path, dump: func(t testing.TB) []byte {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}}
}

func backends(t *testing.T) map[string]func(testing.TB) backend {
	return map[string]func(testing.TB) backend{"redis": redisBackend, "postgres": pgBackend, "bolt": boltBackend}
}

func dur(d time.Duration) *time.Duration { return &d }

// Each backend keeps verdicts by keyed hash for their outcome's TTL, hands
// back those fresh enough for the caller, and never keeps timeouts or
// deferrals.
func TestStoresKeepVerdicts(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := context.Background()
			ttls := TTLs{Deliverable: time.Hour, Undeliverable: time.Hour, CatchAll: 2 * time.Second, Unverified: 2 * time.Second}
			h, err := Open(ctx, b.url, Options{TTLs: ttls})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			err = h.Record(ctx, []verify.NewVerdict{
				{Mailbox: "Alice@Example.test", Code: verify.CodeDeliverable, CheckedAt: now.Add(-10 * time.Minute)},
				{Mailbox: "bob@example.test", Code: verify.CodeMailboxNotFound, CheckedAt: now},
				{Mailbox: "carol@catchall.test", Code: verify.CodeCatchAll, CheckedAt: now},
				{Mailbox: "dave@example.test", Code: verify.CodeTimeout, CheckedAt: now},
				{Mailbox: "erin@grey.test", Code: verify.CodeValidDomain, CheckedAt: now, Temporary: true},
				{Mailbox: "frank@example.test", Code: verify.CodeValidDomain, CheckedAt: now},
			})
			if err != nil {
				t.Fatal(err)
			}
			boxes := []string{"alice@example.test", "bob@example.test", "carol@catchall.test", "dave@example.test", "erin@grey.test", "frank@example.test", "nobody@example.test"}
			got, err := h.Lookup(ctx, boxes, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := []verify.Code{verify.CodeDeliverable, verify.CodeMailboxNotFound, verify.CodeCatchAll, 0, 0, verify.CodeValidDomain, 0}
			for i, w := range want {
				if got[i].Code != w {
					t.Errorf("%s: code %d, want %d", boxes[i], got[i].Code, w)
				}
			}
			if d := got[0].CheckedAt.Sub(now.Add(-10 * time.Minute)); d > time.Second || d < -time.Second {
				t.Errorf("checked at %v, recorded %v", got[0].CheckedAt, now.Add(-10*time.Minute))
			}
			// A caller asking for fresher than ten minutes probes alice again.
			got, _ = h.Lookup(ctx, boxes[:2], dur(5*time.Minute))
			if got[0].Code != 0 || got[1].Code != verify.CodeMailboxNotFound {
				t.Errorf("max age 5m: %v, want alice too old and bob fresh", got)
			}
			// Short TTLs run out.
			time.Sleep(2100 * time.Millisecond)
			got, _ = h.Lookup(ctx, boxes, nil)
			if got[0].Code != verify.CodeDeliverable || got[2].Code != 0 || got[5].Code != 0 {
				t.Errorf("after the catch-all TTL: %v", got)
			}
			if st := h.Stats(); st.Recorded != 4 || st.Hits == 0 || st.Misses == 0 {
				t.Errorf("stats %+v: want 4 recorded, hits and misses", st)
			}
			// Nothing in the store says who was checked.
			raw := bytes.ToLower(b.dump(t))
			for _, m := range boxes {
				if bytes.Contains(raw, []byte(m)) || bytes.Contains(raw, []byte(strings.Split(m, "@")[0]+"@")) {
					t.Errorf("the store holds %q in clear", m)
				}
			}
			h.Close()
			// Another process (or a restart) finds the same verdicts: the
			// secret kept in the store is the same.
			h2, err := Open(ctx, b.url, Options{TTLs: ttls})
			if err != nil {
				t.Fatal(err)
			}
			defer h2.Close()
			if got, _ := h2.Lookup(ctx, boxes[:1], nil); got[0].Code != verify.CodeDeliverable {
				t.Errorf("reopened: %v, want the verdict kept", got)
			}
		})
	}
}

// A configured secret keys the hashes; another secret finds nothing.
func TestSecretKeysHashes(t *testing.T) {
	ctx := context.Background()
	url := boltBackend(t).url
	a, err := Open(ctx, url, Options{TTLs: DefaultTTLs(), Secret: []byte("0123456789abcdef-one")})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, []verify.NewVerdict{{Mailbox: "a@example.test", Code: verify.CodeDeliverable}}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := Open(ctx, url, Options{TTLs: DefaultTTLs(), Secret: []byte("0123456789abcdef-two")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, _ := b.Lookup(ctx, []string{"a@example.test"}, nil); got[0].Code != 0 {
		t.Error("a verdict found under another secret")
	}
	if _, err := Open(ctx, "bolt://"+filepath.Join(t.TempDir(), "x.db"), Options{Secret: []byte("short")}); err == nil {
		t.Error("a 5-byte secret accepted")
	}
	var warned string
	t.Setenv(SecretEnv, "")
	c, err := Open(ctx, "bolt://"+filepath.Join(t.TempDir(), "y.db"), Options{Warn: func(m string) { warned = m }})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if warned == "" {
		t.Error("no warning without a configured secret")
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"http://x", "postgres://127.0.0.1:5432/test?table=Bad-Name", "bolt://", "::"} {
		if h, err := Open(context.Background(), u, Options{Secret: []byte("0123456789abcdef")}); err == nil {
			h.Close()
			t.Errorf("Open(%q) accepted", u)
		}
	}
}

// The bolt janitor removes expired entries.
func TestBoltSweep(t *testing.T) {
	ctx := context.Background()
	url := boltBackend(t).url
	h, err := Open(ctx, url, Options{TTLs: TTLs{Deliverable: time.Hour, CatchAll: time.Second}, Secret: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	old := time.Now().Add(-2 * time.Second)
	var vs []verify.NewVerdict
	for i := range 50 {
		code := verify.CodeCatchAll
		if i%2 == 0 {
			code = verify.CodeDeliverable
		}
		vs = append(vs, verify.NewVerdict{Mailbox: randHex(4) + "@example.test", Code: code, CheckedAt: old})
	}
	if err := h.Record(ctx, vs); err != nil {
		t.Fatal(err)
	}
	st := h.store.(*boltStore)
	if err := st.sweep(time.Now()); err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = st.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(boltVerdicts).Stats().KeyN; return nil })
	if n != 25 {
		t.Errorf("%d entries after the sweep, want the 25 unexpired", n)
	}
}

// resolver resolves every domain to one host.
type resolver struct{}

func (resolver) Lookup(context.Context, string) (mxdnsResult, error) { return okResult, nil }

// checker answers from a table and counts what it was asked.
type checker struct {
	mu     sync.Mutex
	asked  []string
	answer map[string]verify.Code
}

func (c *checker) CheckMailboxes(_ context.Context, _ string, _ []mxdnsHost, addrs []string, out []verify.Code) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range addrs {
		c.asked = append(c.asked, a)
		out[i] = c.answer[strings.ToLower(a)]
	}
	return nil
}

func (c *checker) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.asked
	c.asked = nil
	return a
}

// The engine answers from the history when the verdict is fresh enough
// for the caller, probes otherwise, and records what it probed.
func TestEngineReusesFreshVerdicts(t *testing.T) {
	ctx := context.Background()
	h, err := Open(ctx, boltBackend(t).url, Options{TTLs: DefaultTTLs(), Secret: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ck := &checker{answer: map[string]verify.Code{
		"ann@example.test": verify.CodeDeliverable, "ben@example.test": verify.CodeMailboxNotFound,
		"cat@example.test": verify.CodeValidDomain, // unconfirmed: may be a deferral, never kept
	}}
	e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}}
	addrs := []string{"ann@example.test", "Ben@Example.test", "cat@example.test"}
	res := make([]verify.Result, len(addrs))
	opts := verify.Options{SMTP: true}
	if err := e.VerifyBatch(ctx, addrs, res, opts); err != nil {
		t.Fatal(err)
	}
	if got := ck.take(); len(got) != 3 {
		t.Fatalf("first run probed %v, want all three", got)
	}
	for _, r := range res {
		if r.FromHistory {
			t.Errorf("%s from history on the first run", r.Address)
		}
	}
	// Again: ann and ben come from the history, cat is probed.
	if err := e.VerifyBatch(ctx, addrs, res, opts); err != nil {
		t.Fatal(err)
	}
	if got := ck.take(); len(got) != 1 || got[0] != "cat@example.test" {
		t.Errorf("second run probed %v, want only the unconfirmed one", got)
	}
	if !res[0].FromHistory || res[0].Code != verify.CodeDeliverable || !res[1].FromHistory || res[1].Code != verify.CodeMailboxNotFound || res[2].FromHistory {
		t.Errorf("second run: %+v", res)
	}
	// A caller who wants verdicts under a millisecond old probes again.
	time.Sleep(5 * time.Millisecond)
	opts.MaxAge = dur(time.Millisecond)
	if err := e.VerifyBatch(ctx, addrs, res, opts); err != nil {
		t.Fatal(err)
	}
	if got := ck.take(); len(got) != 3 {
		t.Errorf("max age 1ms probed %v, want all three", got)
	}
	// Zero: probe everything (and the single-address path agrees).
	opts.MaxAge = dur(0)
	if r := e.Verify(ctx, "ann@example.test", opts); r.FromHistory || len(ck.take()) != 1 {
		t.Errorf("max age 0 answered from history: %+v", r)
	}
	opts.MaxAge = nil
	if r := e.Verify(ctx, "ann@example.test", opts); !r.FromHistory || r.Code != verify.CodeDeliverable || len(ck.take()) != 0 {
		t.Errorf("Verify did not reuse the verdict: %+v", r)
	}
	// Without SMTP the caller asked for the domain check only: no history.
	if r := e.Verify(ctx, "ann@example.test", verify.Options{}); r.FromHistory || r.Code != verify.CodeValidDomain {
		t.Errorf("smtp=false: %+v", r)
	}
}

// A history that cannot be read is skipped: every address is probed.
func TestEngineProbesWhenHistoryFails(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	h, err := New(&redisStore{rdb: rdb, prefix: "x:"}, []byte("0123456789abcdef"), DefaultTTLs())
	if err != nil {
		t.Fatal(err)
	}
	ck := &checker{answer: map[string]verify.Code{"ann@example.test": verify.CodeDeliverable}}
	e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}}
	r := e.Verify(ctx, "ann@example.test", verify.Options{SMTP: true})
	if r.Code != verify.CodeDeliverable || r.FromHistory || len(ck.take()) != 1 {
		t.Errorf("with the history down: %+v", r)
	}
	if st := h.Stats(); st.Errors == 0 {
		t.Errorf("stats %+v: want errors counted", st)
	}
}
