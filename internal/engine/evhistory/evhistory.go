// Package evhistory is the verification history: each mailbox verdict of
// the SMTP stage, kept with the time it was checked for a TTL that depends
// on the outcome, so that lists and GET /v5/ev answer from it when the
// verdict is fresh enough for the caller and probe otherwise.
//
// # Keys
//
// An address is never stored. The key is HMAC-SHA256 over the normalised
// mailbox (local part and ASCII domain, lower-cased), truncated to 128
// bits, under a secret of the installation. A plain hash would not do:
// addresses are guessable, and MD5 and SHA hashes of addresses are traded
// and looked up by this very industry, so anyone reading a plain-hashed
// store could test addresses against it. With a keyed hash, the store
// alone tells nothing. The secret comes from HISTORY_KEY (a Secret: the
// manager's and API's environment, the workers' through
// --worker-env-secret); without one, a random secret is created once in
// the store itself, which still stops dictionaries built elsewhere but
// not someone who can read the store (the log says so).
//
// # What is kept, and how long
//
// Deliverable (50) and undeliverable (400 no such mailbox, 420 refused by
// policy) for weeks; catch-all (45), mailbox full (410) and unverified
// (20: a host answered, nothing confirmed) for days; timeouts (5) and
// deferrals (greylisting that outlasted the retries) never. Every TTL is a
// flag (TTLs, BindFlags); zero keeps nothing of that kind.
//
// # Backends
//
// Redis (the fleet backend, by default when --fleet-url is given),
// PostgreSQL, or an embedded bbolt file for a single process (make run).
// See Open.
package evhistory

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// Key is the keyed hash of a normalised mailbox.
type Key [16]byte

// Entry is what a backend holds for a key.
type Entry struct {
	Found     bool
	Code      verify.Code
	CheckedAt time.Time
}

// Record is one verdict to keep until CheckedAt+TTL.
type Record struct {
	Key       Key
	Code      verify.Code
	CheckedAt time.Time
	TTL       time.Duration

	mailbox string // hashed into Key once the secret is known
}

// Store is a backend: it returns unexpired entries only.
type Store interface {
	Get(ctx context.Context, keys []Key) ([]Entry, error)
	Put(ctx context.Context, recs []Record) error
	// Secret returns the installation's secret kept in the store,
	// creating it (concurrently safe: every process gets the same) when
	// there is none.
	Secret(ctx context.Context) ([]byte, error)
	Close() error
}

// TTLs say how long each kind of verdict is kept.
type TTLs struct {
	Deliverable   time.Duration // 50
	Undeliverable time.Duration // 400, 420
	CatchAll      time.Duration // 45
	Unverified    time.Duration // 20 (not deferred), 410
}

// DefaultTTLs: four weeks for definite verdicts, three days for catch-all,
// a day for the rest.
func DefaultTTLs() TTLs {
	return TTLs{Deliverable: 28 * 24 * time.Hour, Undeliverable: 28 * 24 * time.Hour, CatchAll: 72 * time.Hour, Unverified: 24 * time.Hour}
}

// BindFlags registers the TTL flags on fs.
func (t *TTLs) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&t.Deliverable, "history-ttl-deliverable", t.Deliverable, "how long a deliverable verdict (50) is reused from the history (0: never kept)")
	fs.DurationVar(&t.Undeliverable, "history-ttl-undeliverable", t.Undeliverable, "how long an undeliverable verdict (400 no such mailbox, 420 refused) is reused")
	fs.DurationVar(&t.CatchAll, "history-ttl-catchall", t.CatchAll, "how long a catch-all verdict (45) is reused")
	fs.DurationVar(&t.Unverified, "history-ttl-unverified", t.Unverified, "how long an unverified (20) or mailbox-full (410) verdict is reused; timeouts and deferrals are never kept")
}

// For returns how long a verdict is kept (0: not at all).
func (t TTLs) For(c verify.Code, temporary bool) time.Duration {
	switch c {
	case verify.CodeDeliverable:
		return t.Deliverable
	case verify.CodeMailboxNotFound, verify.CodeMailNotAccepted:
		return t.Undeliverable
	case verify.CodeCatchAll:
		return t.CatchAll
	case verify.CodeMailboxFull:
		return t.Unverified
	case verify.CodeValidDomain:
		if temporary {
			return 0 // a deferral: the next check may well succeed
		}
		return t.Unverified
	}
	return 0
}

// Stats are the history's counters.
type Stats struct {
	Hits     uint64 // lookups answered with a verdict fresh enough
	Misses   uint64 // lookups without one (none kept, or older than the caller's maximum age)
	Errors   uint64 // backend calls that failed (the lookups then probe)
	Recorded uint64 // verdicts kept
}

// Counters names the counters for shard summaries and metrics.
func (s Stats) Counters() map[string]float64 {
	return map[string]float64{
		"history_hits":     float64(s.Hits),
		"history_misses":   float64(s.Misses),
		"history_errors":   float64(s.Errors),
		"history_recorded": float64(s.Recorded),
	}
}

// History implements verify.History on a Store.
type History struct {
	store Store
	ttls  TTLs
	now   func() time.Time

	// The secret, or (kept in the store) read on first use: a backend
	// unreachable at start delays it without failing the process.
	mu        sync.Mutex
	secret    []byte
	fromStore bool
	warn      func(string)

	hits, misses, errs, recorded atomic.Uint64
}

var _ verify.History = (*History)(nil)

// New returns a history on store with secret (at least 16 bytes).
func New(store Store, secret []byte, ttls TTLs) (*History, error) {
	if len(secret) < 16 {
		return nil, errors.New("evhistory: the secret must have at least 16 bytes")
	}
	return &History{store: store, secret: secret, ttls: ttls, now: time.Now}, nil
}

// newFromStore returns a history whose secret is the store's own.
func newFromStore(store Store, ttls TTLs, warn func(string)) *History {
	return &History{store: store, ttls: ttls, now: time.Now, fromStore: true, warn: warn}
}

// key returns the secret, reading it from the store the first time.
func (h *History) key(ctx context.Context) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.secret != nil {
		return h.secret, nil
	}
	s, err := h.store.Secret(ctx)
	if err != nil {
		return nil, fmt.Errorf("the history's secret: %w", err)
	}
	if len(s) < 16 {
		return nil, errors.New("the history's secret in the store is too short")
	}
	h.secret = s
	if h.warn != nil {
		h.warn("no " + SecretEnv + ": the verification history's hashes are keyed with a secret kept in the history's own store")
	}
	return s, nil
}

// Close closes the store.
func (h *History) Close() error { return h.store.Close() }

// TTLs returns the TTLs in use.
func (h *History) TTLs() TTLs { return h.ttls }

// Stats returns a snapshot of the counters.
func (h *History) Stats() Stats {
	return Stats{Hits: h.hits.Load(), Misses: h.misses.Load(), Errors: h.errs.Load(), Recorded: h.recorded.Load()}
}

// Counters implements verify.Reporter.
func (h *History) Counters() map[string]float64 { return h.Stats().Counters() }

// keyOf is the key of a mailbox (local@domain, the domain in ASCII).
func keyOf(secret []byte, mailbox string) Key {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("ev1\x00"))
	m.Write([]byte(strings.ToLower(strings.TrimSpace(mailbox))))
	var k Key
	copy(k[:], m.Sum(nil))
	return k
}

// Lookup implements verify.History: the verdicts checked at most maxAge
// ago (nil: any still kept). A failing backend is an error; the caller
// probes, it never trusts what it could not read.
func (h *History) Lookup(ctx context.Context, mailboxes []string, maxAge *time.Duration) ([]verify.PastVerdict, error) {
	secret, err := h.key(ctx)
	var entries []Entry
	if err == nil {
		keys := make([]Key, len(mailboxes))
		for i, m := range mailboxes {
			keys[i] = keyOf(secret, m)
		}
		entries, err = h.store.Get(ctx, keys)
	}
	if err != nil {
		h.errs.Add(1)
		h.misses.Add(uint64(len(mailboxes)))
		return nil, fmt.Errorf("verification history: %w", err)
	}
	out := make([]verify.PastVerdict, len(mailboxes))
	now := h.now()
	var hits uint64
	for i, e := range entries {
		if !e.Found || (maxAge != nil && now.Sub(e.CheckedAt) > *maxAge) || h.ttls.For(e.Code, false) <= 0 ||
			now.Sub(e.CheckedAt) > h.ttls.For(e.Code, false) {
			continue // none, too old for the caller, or kept longer than today's TTL allows
		}
		out[i] = verify.PastVerdict{Code: e.Code, CheckedAt: e.CheckedAt}
		hits++
	}
	h.hits.Add(hits)
	h.misses.Add(uint64(len(mailboxes)) - hits)
	return out, nil
}

// Record implements verify.History: keeps the verdicts their TTLs allow.
func (h *History) Record(ctx context.Context, verdicts []verify.NewVerdict) error {
	recs := make([]Record, 0, len(verdicts))
	for _, v := range verdicts {
		ttl := h.ttls.For(v.Code, v.Temporary)
		if ttl <= 0 {
			continue
		}
		at := v.CheckedAt
		if at.IsZero() {
			at = h.now()
		}
		recs = append(recs, Record{Code: v.Code, CheckedAt: at, TTL: ttl, mailbox: v.Mailbox})
	}
	if len(recs) == 0 {
		return nil
	}
	secret, err := h.key(ctx)
	if err == nil {
		for i := range recs {
			recs[i].Key = keyOf(secret, recs[i].mailbox)
		}
		err = h.store.Put(ctx, recs)
	}
	if err != nil {
		h.errs.Add(1)
		return fmt.Errorf("verification history: %w", err)
	}
	h.recorded.Add(uint64(len(recs)))
	return nil
}
