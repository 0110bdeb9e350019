package people

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// KeyKind says what a Key's value is.
type KeyKind uint8

const (
	// KeyEmail: a plain-text address (normalised by EmailKey).
	KeyEmail KeyKind = iota + 1
	// KeyMD5: the lower-case hex MD5 of the normalised address.
	KeyMD5
	// KeySHA1: the lower-case hex SHA-1 of the normalised address.
	KeySHA1
	// KeyNamePostal marks a match by name and postal address in Evidence;
	// it is never a lookup key (a Key of this kind matches nothing).
	KeyNamePostal
)

func (k KeyKind) String() string {
	switch k {
	case KeyEmail:
		return "email"
	case KeyMD5:
		return "md5"
	case KeySHA1:
		return "sha1"
	case KeyNamePostal:
		return "name_postal"
	}
	return "none"
}

// Key identifies one person for a lookup.
type Key struct {
	Kind  KeyKind
	Value string
}

// EmailKey returns the key of a plain-text address (normalised).
func EmailKey(email string) Key { return Key{KeyEmail, NormalizeEmail(email)} }

// MD5Key returns the key of a hex MD5 digest (trimmed, lower-cased).
func MD5Key(digest string) Key { return Key{KeyMD5, strings.ToLower(strings.TrimSpace(digest))} }

// SHA1Key returns the key of a hex SHA-1 digest (trimmed, lower-cased).
func SHA1Key(digest string) Key { return Key{KeySHA1, strings.ToLower(strings.TrimSpace(digest))} }

// raw returns the bytes a store indexes for k, and false when k can never
// match (an empty or malformed value, an unknown kind). Email keys are
// normalised here too, so a Key built by hand works as well.
func (k Key) raw() ([]byte, bool) {
	switch k.Kind {
	case KeyEmail:
		e := NormalizeEmail(k.Value)
		return []byte(e), e != ""
	case KeyMD5, KeySHA1:
		want := 32
		if k.Kind == KeySHA1 {
			want = 40
		}
		v := strings.TrimSpace(k.Value)
		if len(v) != want {
			return nil, false
		}
		b, err := hex.DecodeString(v)
		return b, err == nil
	}
	return nil, false
}

// ErrNotFound is returned by Get when no person has the key.
var ErrNotFound = errors.New("people: not found")

// Store is the reference data store. Implementations are safe for
// concurrent use.
type Store interface {
	// Upsert inserts or replaces records, keyed by normalised email. Records
	// are normalised and validated first; if any is invalid nothing is
	// written and the error is a *RecordError. When an email occurs more
	// than once in recs, the last one wins. One call is atomic.
	Upsert(ctx context.Context, recs []Record) error
	// Delete removes the people with these emails (normalised); unknown
	// ones are ignored.
	Delete(ctx context.Context, emails []string) error
	// Get returns the person with the key, or ErrNotFound.
	Get(ctx context.Context, key Key) (*Record, error)
	// LookupBatch returns, for each key, its person or nil (not found or a
	// key that cannot match, such as a malformed digest). The result is
	// aligned with keys.
	LookupBatch(ctx context.Context, keys []Key) ([]*Record, error)
	// Household returns the people of a household, ordered by email; nil
	// when there are none or id is empty.
	Household(ctx context.Context, id string) ([]Record, error)
	// HouseholdBatch returns Household for each id, aligned with ids.
	HouseholdBatch(ctx context.Context, ids []string) ([][]Record, error)
	// Close releases the store.
	Close() error
}

// Open opens (creating when needed) the store a URL names:
//
//	bolt:///abs/path/people.db   embedded bbolt file (bolt:rel/path.db for a relative path)
//	    ?nosync=true             skip fsync on commit (bulk loads of re-creatable data only)
//	    ?timeout=5s              how long to wait for the file lock (default 5s)
//	    ?pagesize=16384          page size of a new file (default 16 KiB)
//	postgres://user@host:5432/db?sslmode=disable   (or postgresql://)
//	    &schema=name             schema of the tables (default "public"); created when missing
//	    &pool_max_conns=N ...    the other pgx/libpq parameters as usual
//
// PostgreSQL tables are created or migrated on Open; doing so again is a
// no-op.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("people: store URL: %w", err)
	}
	switch u.Scheme {
	case "bolt", "bbolt":
		return openBolt(u)
	case "postgres", "postgresql":
		return openPostgres(ctx, u)
	}
	return nil, fmt.Errorf("people: unsupported store URL scheme %q (want bolt or postgres)", u.Scheme)
}

// filePath returns the file system path of an embedded store URL.
func filePath(u *url.URL) (string, error) {
	p := u.Path
	if u.Opaque != "" {
		p = u.Opaque
	}
	if u.Host != "" && u.Host != "localhost" {
		// bolt://dir/file.db: treat as relative dir/file.db.
		p = u.Host + p
	}
	if p == "" {
		return "", fmt.Errorf("people: %s URL without a path", u.Scheme)
	}
	return p, nil
}

// RecordError reports an invalid record passed to Upsert: its index in the
// slice and the field. Like FieldError it never carries the value.
type RecordError struct {
	Index int
	Err   *FieldError
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("people: record %d: %v", e.Index, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// prepare normalises and validates a copy of recs and drops all but the
// last record of each email, keeping the input order otherwise.
func prepare(recs []Record) ([]Record, error) {
	out := make([]Record, len(recs))
	copy(out, recs)
	seen := make(map[string]int, len(out))
	dups := false
	for i := range out {
		out[i].Normalize()
		if err := out[i].Validate(); err != nil {
			return nil, &RecordError{Index: i, Err: err.(*FieldError)}
		}
		if _, ok := seen[out[i].Email]; ok {
			dups = true
		}
		seen[out[i].Email] = i
	}
	if dups {
		kept := out[:0]
		for i := range out {
			if seen[out[i].Email] == i {
				kept = append(kept, out[i])
			}
		}
		out = kept
	}
	return out, nil
}

// normEmails normalises and de-duplicates emails, dropping empty ones.
func normEmails(emails []string) []string {
	out := make([]string, 0, len(emails))
	for _, e := range emails {
		if e = NormalizeEmail(e); e != "" {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// parallel runs fn over [0, n) split into up to GOMAXPROCS chunks of at
// least minChunk items each, and returns the first error.
func parallel(n, minChunk int, fn func(lo, hi int) error) error {
	parts := min(runtime.GOMAXPROCS(0), n/minChunk)
	if parts <= 1 {
		return fn(0, n)
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { errs[p] = fn(p*n/parts, (p+1)*n/parts) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
