package evhistory

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/url"
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

	"github.com/emaildata/emaildata/internal/platform/clock"
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
	// flush loses everything the store holds, as a Redis restarted
	// without persistence (or FLUSHDB), or emptied tables, do.
	flush func(t testing.TB)
	// expireKey ends the key fingerprint's lease now, as the lease of
	// processes that all stopped does.
	expireKey func(t testing.TB)
}

func redisBackend(t testing.TB) backend {
	rdb := redistest.Need(t)
	prefix := redistest.Prefix(t, rdb, "evhtest")
	keys := func() []string {
		ks, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		return ks
	}
	return backend{url: redistest.URLOf(prefix), dump: func(t testing.TB) []byte {
		var b bytes.Buffer
		for _, k := range keys() {
			v, _ := rdb.Get(context.Background(), k).Bytes()
			b.WriteString(k)
			b.Write(v)
		}
		return b.Bytes()
	}, flush: func(testing.TB) {
		redistest.DeletePrefix(rdb, prefix)
	}, expireKey: func(t testing.TB) {
		if err := rdb.Del(context.Background(), prefix+"ev-key").Err(); err != nil {
			t.Fatal(err)
		}
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
		pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+`, `+table+`_key`)
		pool.Close()
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	exec := func(t testing.TB, q string) {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return backend{url: url + sep + "table=" + table, flush: func(t testing.TB) {
		exec(t, `TRUNCATE `+table+`, `+table+`_key`)
	}, expireKey: func(t testing.TB) {
		exec(t, `UPDATE `+table+`_key SET expires_at = now() - interval '1 second'`)
	}, dump: func(t testing.TB) []byte {
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
	// A bolt file has one opener: flush and expireKey are done through
	// the history's own store (boltStore.flush, expireKey).
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

// testSecret keys the tests' histories.
var testSecret = []byte("0123456789abcdef")

// clock is a test's injected clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const acme = "api/acme"

// mustBolt opens the bolt store of url.
func mustBolt(t testing.TB, rawURL string) Store {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openBolt(u, clock.Wall{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// expireKey ends the key fingerprint's lease now.
func (s *boltStore) expireKey(t testing.TB) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltMeta)
		v := append([]byte(nil), b.Get(boltKey)...)
		if len(v) < 8 {
			return nil
		}
		binary.BigEndian.PutUint64(v[len(v)-8:], uint64(time.Now().Add(-time.Second).UnixNano()))
		return b.Put(boltKey, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each backend keeps verdicts by keyed hash for their outcome's TTL, hands
// back those fresh enough for the caller, and never keeps timeouts or
// deferrals.
func TestStoresKeepVerdicts(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := context.Background()
			ttls := TTLs{Deliverable: time.Hour, Undeliverable: time.Hour, CatchAll: 2 * time.Second, Unverified: 2 * time.Second}
			now := time.Now()
			clk := &testClock{t: now}
			h, err := Open(ctx, b.url, Options{TTLs: ttls, Secret: testSecret, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			err = h.Record(ctx, acme, []verify.NewVerdict{
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
			got, err := h.Lookup(ctx, acme, boxes, nil)
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
			got, _ = h.Lookup(ctx, acme, boxes[:2], dur(5*time.Minute))
			if got[0].Code != 0 || got[1].Code != verify.CodeMailboxNotFound {
				t.Errorf("max age 5m: %v, want alice too old and bob fresh", got)
			}
			// Short TTLs run out (by the history's clock: whatever the
			// store still holds, nothing older than its TTL is trusted).
			clk.Add(2100 * time.Millisecond)
			got, _ = h.Lookup(ctx, acme, boxes, nil)
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
			// Another process (or a restart) with the same key finds the
			// same verdicts.
			h2, err := Open(ctx, b.url, Options{TTLs: ttls, Secret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			defer h2.Close()
			if got, _ := h2.Lookup(ctx, acme, boxes[:1], nil); got[0].Code != verify.CodeDeliverable {
				t.Errorf("reopened: %v, want the verdict kept", got)
			}
		})
	}
}

// A configured secret keys the hashes; another secret finds nothing (and
// is reported as a mismatch). Without a secret nothing opens: the key is
// never kept in the store it protects.
func TestSecretKeysHashes(t *testing.T) {
	ctx := context.Background()
	url := boltBackend(t).url
	a, err := Open(ctx, url, Options{TTLs: DefaultTTLs(), Secret: []byte("0123456789abcdef-one")})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, acme, []verify.NewVerdict{{Mailbox: "a@example.test", Code: verify.CodeDeliverable}}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := New(mustBolt(t, url), []byte("0123456789abcdef-two"), Options{TTLs: DefaultTTLs()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The store's key lease (3 minutes by default) is the first one's:
	// the second key may not read or write.
	if got, err := b.Lookup(ctx, acme, []string{"a@example.test"}, nil); !errors.Is(err, ErrKeyMismatch) || got != nil {
		t.Errorf("another key: %v, %v; want ErrKeyMismatch", got, err)
	}
	b.store.(*boltStore).expireKey(t)
	if err := b.CheckKey(ctx); err != nil {
		t.Fatalf("the first key's lease ran out: %v", err)
	}
	if got, err := b.Lookup(ctx, acme, []string{"a@example.test"}, nil); err != nil || got[0].Code != 0 {
		t.Errorf("another key, once the first one's lease ran out: %v, %v; want nothing found", got, err)
	}
	for _, bad := range [][]byte{nil, []byte("short")} {
		if h, err := Open(ctx, "bolt://"+filepath.Join(t.TempDir(), "x.db"), Options{Secret: bad}); err == nil {
			h.Close()
			t.Errorf("secret %q accepted", bad)
		}
	}
}

// LoadSecret reads $HISTORY_KEY or a file, trimmed alike, and refuses
// none or a short one with what to do.
func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("  file-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env, file, want, err string
	}{
		{"env-key-0123456789\n", "", "env-key-0123456789", ""},
		{"env-key-0123456789", file, "file-key-0123456789", ""},
		{"", "", "", "needs a key: set HISTORY_KEY or --history-key-file (in a cluster worker pods get HISTORY_KEY from the installation secret"},
		{"   ", "", "", "needs a key"},
		{"", short, "", "has 3 bytes, want at least 16"},
		{"", filepath.Join(dir, "missing"), "", "history key file"},
	} {
		t.Setenv(SecretEnv, tc.env)
		got, err := LoadSecret(tc.file)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("env %q file %q: %v, want an error with %q", tc.env, tc.file, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("env %q file %q: %q, %v; want %q", tc.env, tc.file, got, err, tc.want)
		}
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"http://x", "postgres://127.0.0.1:5432/test?table=Bad-Name", "bolt://", "::"} {
		if h, err := Open(context.Background(), u, Options{Secret: testSecret}); err == nil {
			h.Close()
			t.Errorf("Open(%q) accepted", u)
		}
	}
}

// The bolt janitor removes expired entries.
func TestBoltSweep(t *testing.T) {
	ctx := context.Background()
	url := boltBackend(t).url
	h, err := Open(ctx, url, Options{TTLs: TTLs{Deliverable: time.Hour, CatchAll: time.Second}, Secret: testSecret})
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
	if err := h.Record(ctx, acme, vs); err != nil {
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
	clk := &testClock{t: time.Now()}
	h, err := Open(ctx, boltBackend(t).url, Options{TTLs: DefaultTTLs(), Secret: testSecret, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ck := &checker{answer: map[string]verify.Code{
		"ann@example.test": verify.CodeDeliverable, "ben@example.test": verify.CodeMailboxNotFound,
		"cat@example.test": verify.CodeValidDomain, // unconfirmed: may be a deferral, never kept
	}}
	e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}, Now: clk.Now}
	addrs := []string{"ann@example.test", "Ben@Example.test", "cat@example.test"}
	res := make([]verify.Result, len(addrs))
	opts := verify.Options{SMTP: true, Tenant: acme}
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
	clk.Add(5 * time.Millisecond)
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
	h, err := New(&redisStore{rdb: rdb, prefix: "x:", clk: clock.Wall{}}, testSecret, Options{TTLs: DefaultTTLs()})
	if err != nil {
		t.Fatal(err)
	}
	ck := &checker{answer: map[string]verify.Code{"ann@example.test": verify.CodeDeliverable}}
	e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}}
	r := e.Verify(ctx, "ann@example.test", verify.Options{SMTP: true, Tenant: acme})
	if r.Code != verify.CodeDeliverable || r.FromHistory || len(ck.take()) != 1 {
		t.Errorf("with the history down: %+v", r)
	}
	if st := h.Stats(); st.Errors == 0 {
		t.Errorf("stats %+v: want errors counted", st)
	}
}
