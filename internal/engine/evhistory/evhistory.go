// Package evhistory is the verification history: each mailbox verdict of
// the SMTP stage, kept with the time it was checked for a TTL that depends
// on the outcome, so that lists and GET /v5/ev answer from it when the
// verdict is fresh enough for the caller and probe otherwise.
//
// # Keys
//
// An address is never stored. The key is HMAC-SHA256 over the normalised
// mailbox (local part and ASCII domain, lower-cased), and in the tenant
// scope over the tenant before it, truncated to 128 bits, under the
// installation's secret. A plain hash would not do: addresses are
// guessable, and MD5 and SHA hashes of addresses are traded and looked up
// by this very industry, so anyone reading a plain-hashed store could test
// addresses against it. With a keyed hash, the store alone tells nothing.
// The secret comes from the installation's Secret (the manager and the
// API read it by name; the workers get it as HISTORY_KEY from a
// secretKeyRef), or from $HISTORY_KEY or a mounted file (LoadSecret: make
// run, worker run), never from the store it protects; Open refuses to run
// without one. The store holds
// only a fingerprint of it, which every process checks (see CheckKey).
//
// # Scopes
//
// Whose earlier checks may answer a call: the caller's tenant alone (the
// default), or every tenant's, dated to the hour. See Scope.
//
// # The key check
//
// Every process of an installation must key the history with the same
// secret, or one address is kept under several keys: probed again, and
// never said. So the store holds a fingerprint of the key the history is
// kept under (HMAC of a fixed label and the scope under the secret: it
// tells nothing of the secret), with a lease. Each process claims it at
// start and then every KeyCheckEvery (and before reading or writing when
// a check is due): an empty store (new, or one that lost its data) gets
// this process's fingerprint; a matching one has its lease renewed;
// another one means another key (or another scope) is in use, and this
// process reports it (log, the history_key_mismatches counter, Health)
// and neither reads nor writes the history until they agree. When every
// process of the old key is gone, its lease runs out (KeyLeaseFactor
// times KeyCheckEvery) and the new key takes the store over: a rotation
// heals by itself, loudly.
//
// # What is kept, and how long
//
// Deliverable (50) and undeliverable (400 no such mailbox, 420 refused by
// policy) for weeks; catch-all (45), mailbox full (410) and unverified
// (20: a host answered, nothing confirmed) for days; timeouts (5) and
// deferrals (greylisting that outlasted the retries) never. Every TTL is a
// setting (TTLs; the Configuration's verification.history.ttls); zero keeps
// nothing of that kind.
//
// # Backends
//
// Redis (the fleet backend, by default when --fleet-url is given),
// PostgreSQL, or an embedded bbolt file for a single process (make run).
// See Open.
package evhistory

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"

	"github.com/emaildata/emaildata/internal/platform/clock"
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
}

// Store is a backend: it returns unexpired entries only.
type Store interface {
	Get(ctx context.Context, keys []Key) ([]Entry, error)
	Put(ctx context.Context, recs []Record) error
	// ClaimKey keeps the fingerprint of the key the history is kept
	// under: with none held (or its lease run out), fp is published with
	// a lease of lease; when fp is held, its lease is renewed. It returns
	// the fingerprint held after the call and whether fp was published
	// now. Concurrent claims agree: one publishes, the others see it.
	ClaimKey(ctx context.Context, fp []byte, lease time.Duration) (held []byte, published bool, err error)
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
	Errors   uint64 // calls that failed (the backend, or a key mismatch): the lookups then probe
	Recorded uint64 // verdicts kept
	// KeyMismatches counts key checks, and history calls refused, because
	// the store is kept under another key (or scope); KeyLost, checks that
	// found this process's key fingerprint gone (the store lost its data)
	// and published it again.
	KeyMismatches uint64
	KeyLost       uint64
}

// Counter names of the key checks, which the manager reads from shard
// summaries to warn on a list (the metrics export every counter).
const (
	CounterKeyMismatches = "history_key_mismatches"
	CounterKeyLost       = "history_key_lost"
)

// Counters names the counters for shard summaries and metrics.
func (s Stats) Counters() map[string]float64 {
	return map[string]float64{
		"history_hits":       float64(s.Hits),
		"history_misses":     float64(s.Misses),
		"history_errors":     float64(s.Errors),
		"history_recorded":   float64(s.Recorded),
		CounterKeyMismatches: float64(s.KeyMismatches),
		CounterKeyLost:       float64(s.KeyLost),
	}
}

// History implements verify.History on a Store.
type History struct {
	store      Store
	ttls       TTLs
	scope      Scope
	secret, fp []byte
	now        func() time.Time
	clk        clock.Clock
	log        *slog.Logger
	checkEvery time.Duration
	lease      time.Duration

	// The key check (keycheck.go): keyMu serialises checks.
	keyMu     sync.Mutex
	keyState  atomic.Int32
	lastCheck time.Time // the last check the store answered
	lastTry   time.Time // the last check tried
	seen      bool      // this process has seen its fingerprint in the store
	detailMu  sync.Mutex
	detail    string
	stopWatch context.CancelFunc
	watchDone chan struct{}

	noTenant sync.Once // warned of a call without a tenant

	hits, misses, errs, recorded atomic.Uint64
	keyMismatches, keyLost       atomic.Uint64
}

var _ verify.History = (*History)(nil)

// New returns a history on store keyed with secret (at least 16 bytes),
// with the scope, TTLs, clock and log of o (o.Secret and o.Redis are
// Open's). It checks the store's key on first use; Open also at once.
func New(store Store, secret []byte, o Options) (*History, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("evhistory: the secret must have at least %d bytes", MinSecretBytes)
	}
	scope, err := ParseScope(string(o.Scope))
	if err != nil {
		return nil, err
	}
	h := &History{store: store, secret: secret, ttls: o.TTLs, scope: scope, now: o.Now, log: o.Log, checkEvery: o.KeyCheckEvery}
	h.clk = clock.Or(o.Clock)
	if h.now == nil {
		h.now = h.clk.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.checkEvery <= 0 {
		h.checkEvery = DefaultKeyCheckEvery
	}
	h.lease = KeyLeaseFactor * h.checkEvery
	h.fp = fingerprint(secret, scope)
	return h, nil
}

// Close stops the key checks and closes the store.
func (h *History) Close() error {
	if h.stopWatch != nil {
		h.stopWatch()
		<-h.watchDone
	}
	return h.store.Close()
}

// TTLs returns the TTLs in use.
func (h *History) TTLs() TTLs { return h.ttls }

// Scope returns the scope in use.
func (h *History) Scope() Scope { return h.scope }

// Stats returns a snapshot of the counters.
func (h *History) Stats() Stats {
	return Stats{Hits: h.hits.Load(), Misses: h.misses.Load(), Errors: h.errs.Load(), Recorded: h.recorded.Load(),
		KeyMismatches: h.keyMismatches.Load(), KeyLost: h.keyLost.Load()}
}

// Counters implements verify.Reporter.
func (h *History) Counters() map[string]float64 { return h.Stats().Counters() }

// forTenant says whether a call of tenant may use the history: in the
// tenant scope, only a call that names its tenant (one that does not, a
// list prepared before scopes, say, is probed: never keyed with another's).
func (h *History) forTenant(tenant string) bool {
	if h.scope == ScopeShared || validTenant(tenant) {
		return true
	}
	h.noTenant.Do(func() {
		h.log.Warn("verification history: a call without a tenant in the tenant scope is neither answered from the history nor kept in it")
	})
	return false
}

// Lookup implements verify.History: tenant's verdicts (any tenant's in the
// shared scope) checked at most maxAge ago (nil: any still kept). A
// failing backend, or a store kept under another key, is an error; the
// caller probes, it never trusts what it could not read.
func (h *History) Lookup(ctx context.Context, tenant string, mailboxes []string, maxAge *time.Duration) ([]verify.PastVerdict, error) {
	out := make([]verify.PastVerdict, len(mailboxes))
	if !h.forTenant(tenant) {
		h.misses.Add(uint64(len(mailboxes)))
		return out, nil
	}
	err := h.keyReady(ctx)
	var entries []Entry
	if err == nil {
		keys := make([]Key, len(mailboxes))
		for i, m := range mailboxes {
			keys[i] = keyOf(h.secret, h.scope, tenant, m)
		}
		entries, err = h.store.Get(ctx, keys)
	}
	if err != nil {
		h.errs.Add(1)
		h.misses.Add(uint64(len(mailboxes)))
		return nil, fmt.Errorf("verification history: %w", err)
	}
	now := h.now()
	var hits uint64
	for i, e := range entries {
		if v, ok := h.fresh(e, now, maxAge); ok {
			out[i] = v
			hits++
		}
	}
	h.hits.Add(hits)
	h.misses.Add(uint64(len(mailboxes)) - hits)
	return out, nil
}

// fresh returns an entry's verdict when it is fresh enough for the caller
// and today's TTL of its outcome, both measured from when the scope dates
// it (the hour, in the shared scope: that is all another tenant learns).
func (h *History) fresh(e Entry, now time.Time, maxAge *time.Duration) (verify.PastVerdict, bool) {
	if !e.Found {
		return verify.PastVerdict{}, false
	}
	at := dated(h.scope, e.CheckedAt)
	age, ttl := now.Sub(at), h.ttls.For(e.Code, false)
	if ttl <= 0 || age > ttl || (maxAge != nil && age > *maxAge) {
		return verify.PastVerdict{}, false
	}
	return verify.PastVerdict{Code: e.Code, CheckedAt: at}, true
}

// Record implements verify.History: keeps tenant's verdicts their TTLs
// allow.
func (h *History) Record(ctx context.Context, tenant string, verdicts []verify.NewVerdict) error {
	if !h.forTenant(tenant) {
		return nil
	}
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
		recs = append(recs, Record{Key: keyOf(h.secret, h.scope, tenant, v.Mailbox), Code: v.Code, CheckedAt: at, TTL: ttl})
	}
	if len(recs) == 0 {
		return nil
	}
	err := h.keyReady(ctx)
	if err == nil {
		err = h.store.Put(ctx, recs)
	}
	if err != nil {
		h.errs.Add(1)
		return fmt.Errorf("verification history: %w", err)
	}
	h.recorded.Add(uint64(len(recs)))
	return nil
}
