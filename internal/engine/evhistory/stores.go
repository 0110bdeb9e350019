package evhistory

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/emaildata/emaildata/internal/engine/verify"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// SecretEnv names the environment variable holding the installation's
// secret (at least MinSecretBytes; a Kubernetes Secret's value).
const SecretEnv = "HISTORY_KEY"

// MinSecretBytes is the shortest secret a history takes (the installation
// secret of internal/platform/installsecret accepts no shorter one).
const MinSecretBytes = 16

// Options configure Open (and New).
type Options struct {
	TTLs TTLs
	// Scope: whose checks answer a call (DefaultScope when empty).
	Scope Scope
	// Secret keys the hashes: at least 16 bytes, required (LoadSecret
	// reads it from $HISTORY_KEY or a file). It is never kept in the store.
	Secret []byte
	// KeyCheckEvery: how often the store's key fingerprint is checked
	// (DefaultKeyCheckEvery when 0); see CheckKey.
	KeyCheckEvery time.Duration
	// Redis, when set, is used for a redis:// URL instead of a new client
	// (the fleet backend's, when both URLs are the same).
	Redis *redis.Client
	// Log hears of the key checks: a mismatch (error), a lost fingerprint
	// (warning). Nil: discarded.
	Log *slog.Logger
	// Clock times the key checks and the stores' own expiry (default the
	// wall clock). Redis and PostgreSQL expire entries on their own
	// clocks: Clock only computes the TTLs and expiry times sent.
	Clock clock.Clock
	// Now reads the time verdicts are aged by (default Clock.Now): tests
	// move it without a bubble.
	Now func() time.Time
}

// Open opens the history a URL names:
//
//	redis://host:port/db[?prefix=emaildata:]   keys <prefix>ev:<hash>, with TTLs
//	postgres://user@host:5432/db[?table=ev_history]   (or postgresql://)
//	bolt:///path/history.db                     an embedded file, one process
//
// It checks the store's key fingerprint at once when the store answers
// (a mismatch is reported, not fatal: the process runs without the
// history until the keys agree), and then every o.KeyCheckEvery.
func Open(ctx context.Context, rawURL string, o Options) (*History, error) {
	if len(o.Secret) < MinSecretBytes {
		return nil, fmt.Errorf("the verification history needs a key of at least %d bytes (its installation secret, %s or --history-key-file)", MinSecretBytes, SecretEnv)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("history url: %w", err)
	}
	var st Store
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix":
		st, err = openRedis(u, o.Redis, clock.Or(o.Clock))
	case "postgres", "postgresql":
		st, err = openPostgres(ctx, u, clock.Or(o.Clock))
	case "bolt", "bbolt":
		st, err = openBolt(u, clock.Or(o.Clock))
	default:
		return nil, fmt.Errorf("history url: unsupported scheme %q (want redis, postgres or bolt)", u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	h, err := New(st, o.Secret, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	_ = h.CheckKey(ctx) // now if the store answers; else on first use
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.stopWatch, h.watchDone = cancel, make(chan struct{})
	go h.watch(wctx)
	return h, nil
}

// value encodes a verdict: code and check time.
func value(code verify.Code, at time.Time) []byte {
	b := make([]byte, 10)
	binary.BigEndian.PutUint16(b, uint16(code))
	binary.BigEndian.PutUint64(b[2:], uint64(at.Unix()))
	return b
}

func decode(b []byte) (Entry, bool) {
	if len(b) < 10 {
		return Entry{}, false
	}
	return Entry{Found: true, Code: verify.Code(binary.BigEndian.Uint16(b)), CheckedAt: time.Unix(int64(binary.BigEndian.Uint64(b[2:])), 0)}, true
}

// redisStore keeps each verdict as a key with the verdict's TTL.
type redisStore struct {
	rdb    *redis.Client
	own    bool
	prefix string
	clk    clock.Clock
}

func openRedis(u *url.URL, shared *redis.Client, clk clock.Clock) (Store, error) {
	prefix := "emaildata:"
	q := u.Query()
	if q.Has("prefix") {
		prefix = q.Get("prefix")
		q.Del("prefix")
	}
	s := &redisStore{rdb: shared, prefix: prefix, clk: clk}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	if shared == nil {
		v := *u
		v.RawQuery = q.Encode()
		opt, err := redis.ParseURL(v.String())
		if err != nil {
			return nil, fmt.Errorf("history url %s: %w", u.Redacted(), err)
		}
		// A history that does not answer within a second is skipped (the
		// addresses are probed), unless the URL sets its own timeouts.
		if !q.Has("dial_timeout") {
			opt.DialTimeout = time.Second
		}
		if !q.Has("read_timeout") {
			opt.ReadTimeout = time.Second
		}
		if !q.Has("write_timeout") {
			opt.WriteTimeout = time.Second
		}
		opt.DialerRetries = 1
		s.rdb, s.own = redis.NewClient(opt), true
	}
	return s, nil
}

func (s *redisStore) key(k Key) string {
	return s.prefix + "ev:" + base64.RawURLEncoding.EncodeToString(k[:])
}

func (s *redisStore) Get(ctx context.Context, keys []Key) ([]Entry, error) {
	out := make([]Entry, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = s.key(k)
	}
	vals, err := s.rdb.MGet(ctx, names...).Result()
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		if str, ok := v.(string); ok {
			out[i], _ = decode([]byte(str))
		}
	}
	return out, nil
}

func (s *redisStore) Put(ctx context.Context, recs []Record) error {
	pipe := s.rdb.Pipeline()
	// The TTL left is sent; Redis counts it down on its own clock.
	now := s.clk.Now()
	for _, r := range recs {
		if left := r.TTL - now.Sub(r.CheckedAt); left > 0 {
			pipe.Set(ctx, s.key(r.Key), value(r.Code, r.CheckedAt), left)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

// claimScript is ClaimKey in one step: publish when none is held, renew
// when the same is, and return what is held.
var claimScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, ARGV[1]}
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {0, cur}
`)

func (s *redisStore) ClaimKey(ctx context.Context, fp []byte, lease time.Duration) ([]byte, bool, error) {
	res, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + "ev-key"}, fp, lease.Milliseconds()).Slice()
	if err != nil {
		return nil, false, err
	}
	if len(res) != 2 {
		return nil, false, fmt.Errorf("key claim: unexpected reply %v", res)
	}
	published, _ := res[0].(int64)
	held, _ := res[1].(string)
	return []byte(held), published == 1, nil
}

func (s *redisStore) Close() error {
	if s.own {
		return s.rdb.Close()
	}
	return nil
}

// quiet drops go-redis' own log lines (one per failed dial, in its own
// format): failures reach the engine as errors and are counted.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// pgStore keeps verdicts in one table; a janitor deletes expired rows.
type pgStore struct {
	pool              *pgxpool.Pool
	table, keys       string // quoted
	rawTable          string
	getSQL, putSQL    string
	stopJanitor       context.CancelFunc
	janitorDone       chan struct{}
	janitorEvery      time.Duration
	clk               clock.Clock
	janitorBatchLimit int
}

func openPostgres(ctx context.Context, u *url.URL, clk clock.Clock) (Store, error) {
	q := u.Query()
	table := "ev_history"
	if q.Has("table") {
		table = q.Get("table")
		q.Del("table")
	}
	if !validIdent(table) {
		return nil, fmt.Errorf("history url: bad table name %q (lower-case letters, digits, _)", table)
	}
	v := *u
	v.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, v.String())
	if err != nil {
		return nil, fmt.Errorf("history url %s: %w", u.Redacted(), err)
	}
	s := &pgStore{
		pool: pool, table: pgx.Identifier{table}.Sanitize(), keys: pgx.Identifier{table + "_key"}.Sanitize(), rawTable: table,
		janitorEvery: time.Hour, janitorBatchLimit: 10_000, clk: clk,
	}
	s.getSQL = `SELECT key, code, checked_at FROM ` + s.table + ` WHERE key = ANY($1) AND expires_at > now()`
	s.putSQL = `INSERT INTO ` + s.table + ` (key, code, checked_at, expires_at)
SELECT * FROM unnest($1::bytea[], $2::smallint[], $3::timestamptz[], $4::timestamptz[])
ON CONFLICT (key) DO UPDATE SET code = EXCLUDED.code, checked_at = EXCLUDED.checked_at, expires_at = EXCLUDED.expires_at
WHERE ` + s.table + `.checked_at <= EXCLUDED.checked_at`
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopJanitor, s.janitorDone = cancel, make(chan struct{})
	go s.janitor(jctx)
	return s, nil
}

func validIdent(s string) bool {
	if s == "" || len(s) > 50 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// migrate creates the tables; concurrent replicas serialise on an
// advisory lock.
func (s *pgStore) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer tx.Rollback(ctx)
	stmts := []string{
		`SELECT pg_advisory_xact_lock(hashtext('emaildata/evhistory/' || $1))`,
		`CREATE TABLE IF NOT EXISTS ` + s.table + ` (key bytea PRIMARY KEY, code smallint NOT NULL, checked_at timestamptz NOT NULL, expires_at timestamptz NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{strings.Trim(s.table, `"`) + "_expires"}.Sanitize() + ` ON ` + s.table + ` (expires_at)`,
		`CREATE TABLE IF NOT EXISTS ` + s.keys + ` (id int PRIMARY KEY, fingerprint bytea NOT NULL, expires_at timestamptz NOT NULL)`,
	}
	for i, q := range stmts {
		var args []any
		if i == 0 {
			args = []any{s.table}
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("history: migrate: %w", err)
		}
	}
	return tx.Commit(ctx)
}

func (s *pgStore) Get(ctx context.Context, keys []Key) ([]Entry, error) {
	out := make([]Entry, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	raw := make([][]byte, len(keys))
	at := make(map[Key][]int, len(keys))
	for i, k := range keys {
		raw[i] = k[:]
		at[k] = append(at[k], i)
	}
	rows, err := s.pool.Query(ctx, s.getSQL, raw)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			kb   []byte
			code int16
			ts   time.Time
		)
		if err := rows.Scan(&kb, &code, &ts); err != nil {
			return nil, err
		}
		var k Key
		copy(k[:], kb)
		for _, i := range at[k] {
			out[i] = Entry{Found: true, Code: verify.Code(code), CheckedAt: ts}
		}
	}
	return out, rows.Err()
}

func (s *pgStore) Put(ctx context.Context, recs []Record) error {
	// One row per key (the last wins), or ON CONFLICT would see it twice.
	last := make(map[Key]int, len(recs))
	for i, r := range recs {
		last[r.Key] = i
	}
	var (
		keys    [][]byte
		codes   []int16
		checked []time.Time
		expires []time.Time
	)
	for i, r := range recs {
		if last[r.Key] != i {
			continue
		}
		keys = append(keys, r.Key[:])
		codes = append(codes, int16(r.Code))
		checked = append(checked, r.CheckedAt)
		expires = append(expires, r.CheckedAt.Add(r.TTL))
	}
	_, err := s.pool.Exec(ctx, s.putSQL, keys, codes, checked, expires)
	return err
}

// ClaimKey runs in a transaction serialised by an advisory lock, with the
// database's clock for the lease.
func (s *pgStore) ClaimKey(ctx context.Context, fp []byte, lease time.Duration) ([]byte, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('emaildata/evhistory/key/' || $1))`, s.rawTable); err != nil {
		return nil, false, err
	}
	var held []byte
	err = tx.QueryRow(ctx, `SELECT fingerprint FROM `+s.keys+` WHERE id = 1 AND expires_at > now()`).Scan(&held)
	published := errors.Is(err, pgx.ErrNoRows)
	switch {
	case published:
		held = fp
		_, err = tx.Exec(ctx, `INSERT INTO `+s.keys+` (id, fingerprint, expires_at) VALUES (1, $1, now() + $2 * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, expires_at = EXCLUDED.expires_at`, fp, lease.Milliseconds())
	case err != nil:
		return nil, false, err
	case bytes.Equal(held, fp):
		_, err = tx.Exec(ctx, `UPDATE `+s.keys+` SET expires_at = now() + $1 * interval '1 millisecond' WHERE id = 1`, lease.Milliseconds())
	}
	if err != nil {
		return nil, false, err
	}
	return held, published, tx.Commit(ctx)
}

// janitor deletes expired rows every janitorEvery, in bounded batches.
func (s *pgStore) janitor(ctx context.Context) {
	defer close(s.janitorDone)
	t := s.clk.NewTicker(s.janitorEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for ctx.Err() == nil {
			tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE key IN (SELECT key FROM `+s.table+
				` WHERE expires_at <= now() LIMIT `+strconv.Itoa(s.janitorBatchLimit)+`)`)
			if err != nil || tag.RowsAffected() < int64(s.janitorBatchLimit) {
				break
			}
		}
	}
}

func (s *pgStore) Close() error {
	s.stopJanitor()
	<-s.janitorDone
	s.pool.Close()
	return nil
}

// boltStore keeps verdicts in an embedded file: value = verdict and expiry.
type boltStore struct {
	db   *bolt.DB
	stop context.CancelFunc
	done chan struct{}
	clk  clock.Clock
}

var (
	boltVerdicts = []byte("ev")
	boltMeta     = []byte("meta")
	boltKey      = []byte("key")
)

func openBolt(u *url.URL, clk clock.Clock) (Store, error) {
	p := u.Path
	if u.Opaque != "" {
		p = u.Opaque
	}
	if u.Host != "" && u.Host != "localhost" {
		p = u.Host + p
	}
	if p == "" {
		return nil, errors.New("history url: bolt URL without a path")
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", p, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{boltVerdicts, boltMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("history %s: %w", p, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &boltStore{db: db, stop: cancel, done: make(chan struct{}), clk: clk}
	go s.janitor(ctx, time.Hour)
	return s, nil
}

func (s *boltStore) Get(_ context.Context, keys []Key) ([]Entry, error) {
	out := make([]Entry, len(keys))
	now := s.clk.Now().Unix()
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltVerdicts)
		for i, k := range keys {
			v := b.Get(k[:])
			if len(v) < 18 || int64(binary.BigEndian.Uint64(v[10:])) <= now {
				continue
			}
			out[i], _ = decode(v)
		}
		return nil
	})
	return out, err
}

func (s *boltStore) Put(_ context.Context, recs []Record) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltVerdicts)
		for _, r := range recs {
			v := append(value(r.Code, r.CheckedAt), make([]byte, 8)...)
			binary.BigEndian.PutUint64(v[10:], uint64(r.CheckedAt.Add(r.TTL).Unix()))
			if err := b.Put(append([]byte(nil), r.Key[:]...), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// ClaimKey keeps the fingerprint and its lease's end in the meta bucket.
func (s *boltStore) ClaimKey(_ context.Context, fp []byte, lease time.Duration) ([]byte, bool, error) {
	var held []byte
	published := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltMeta)
		now := s.clk.Now()
		v := b.Get(boltKey)
		if len(v) > 8 && int64(binary.BigEndian.Uint64(v[len(v)-8:])) > now.UnixNano() {
			held = append([]byte(nil), v[:len(v)-8]...)
			if !bytes.Equal(held, fp) {
				return nil
			}
		} else {
			held, published = append([]byte(nil), fp...), true
		}
		nv := binary.BigEndian.AppendUint64(append([]byte(nil), fp...), uint64(now.Add(lease).UnixNano()))
		return b.Put(boltKey, nv)
	})
	return held, published, err
}

// janitor deletes expired entries every interval.
func (s *boltStore) janitor(ctx context.Context, every time.Duration) {
	defer close(s.done)
	t := s.clk.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			_ = s.sweep(s.clk.Now())
		}
	}
}

func (s *boltStore) sweep(now time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(boltVerdicts).Cursor()
		for k, v := c.First(); k != nil; {
			if len(v) < 18 || int64(binary.BigEndian.Uint64(v[10:])) <= now.Unix() {
				at := append([]byte(nil), k...)
				if err := c.Delete(); err != nil {
					return err
				}
				k, v = c.Seek(at) // the next key: a cursor's Next skips one after a Delete
				continue
			}
			k, v = c.Next()
		}
		return nil
	})
}

func (s *boltStore) Close() error {
	s.stop()
	<-s.done
	return s.db.Close()
}
