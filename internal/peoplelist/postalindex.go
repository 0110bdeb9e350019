package peoplelist

import (
	"context"
	"iter"

	"github.com/emaildata/emaildata/internal/people"
)

// PostalKey is one name/postal lookup: a last name and a zip, as given in
// the input (finders normalise them: letters only, lower-cased, and the
// 5-digit zip).
type PostalKey struct {
	Last string
	Zip  string
}

// PostalFinder is the name/postal index email_append needs. A people.Store
// that also implements it can run email_append.
type PostalFinder interface {
	// FindByNamePostal returns, for each key, the people whose last name
	// and 5-digit zip equal the key's (nil when none, or when the key has
	// no letters or no valid zip), aligned with keys. Each record has at
	// least Email, First, Last, Street, City, State, Zip and HouseholdID.
	// The order of a key's records is the finder's own and must be stable:
	// email_append takes the first of a household as its primary member.
	FindByNamePostal(ctx context.Context, keys []PostalKey) ([][]people.Record, error)
}

// PostalIndex is an in-memory PostalFinder: a map from normalised last name
// and zip to the people, in load order. It keeps the name, address, email
// and household id of each person, not the demographics. It is read-only
// once built, so FindByNamePostal may run concurrently.
type PostalIndex struct {
	byKey map[postalKey][]people.Record
	n     int
}

type postalKey struct{ last, zip string }

func normKey(last, zip string) (postalKey, bool) {
	k := postalKey{normName(last), zip5(zip)}
	return k, k.last != "" && k.zip != ""
}

// NewPostalIndex indexes recs (for example people.Generate, or
// slices.Values of a slice). Records without a last name or a valid zip are
// skipped. A record whose email repeats an earlier one replaces it (the last
// wins, as in people.Store.Upsert).
func NewPostalIndex(recs iter.Seq[people.Record]) *PostalIndex {
	ix := &PostalIndex{byKey: map[postalKey][]people.Record{}}
	seen := map[string]postalKey{}
	for r := range recs {
		r.Normalize()
		if old, ok := seen[r.Email]; ok {
			ix.remove(old, r.Email)
			delete(seen, r.Email)
		}
		k, ok := normKey(r.Last, r.Zip)
		if !ok || r.Email == "" {
			continue
		}
		ix.byKey[k] = append(ix.byKey[k], people.Record{
			Email: r.Email, First: r.First, Middle: r.Middle, Last: r.Last,
			Street: r.Street, City: r.City, State: r.State, Zip: r.Zip,
			HouseholdID: r.HouseholdID,
		})
		seen[r.Email] = k
		ix.n++
	}
	return ix
}

func (ix *PostalIndex) remove(k postalKey, email string) {
	l := ix.byKey[k]
	for i := range l {
		if l[i].Email == email {
			ix.byKey[k] = append(l[:i:i], l[i+1:]...)
			ix.n--
			return
		}
	}
}

// Len returns the number of people indexed.
func (ix *PostalIndex) Len() int { return ix.n }

// FindByNamePostal implements PostalFinder. The records returned are
// copies.
func (ix *PostalIndex) FindByNamePostal(ctx context.Context, keys []PostalKey) ([][]people.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]people.Record, len(keys))
	for i, k := range keys {
		if nk, ok := normKey(k.Last, k.Zip); ok {
			if l := ix.byKey[nk]; len(l) > 0 {
				out[i] = append([]people.Record(nil), l...)
			}
		}
	}
	return out, nil
}

// WithPostalIndex returns store with finder attached: a people.Store that
// is also a PostalFinder, for email_append. Closing it closes store.
func WithPostalIndex(store people.Store, finder PostalFinder) people.Store {
	return &indexedStore{Store: store, finder: finder}
}

type indexedStore struct {
	people.Store
	finder PostalFinder
}

func (s *indexedStore) FindByNamePostal(ctx context.Context, keys []PostalKey) ([][]people.Record, error) {
	return s.finder.FindByNamePostal(ctx, keys)
}

// storeFinder adapts a store's own name/postal index (people.NamePostalFinder,
// which the bolt and PostgreSQL stores implement) to PostalFinder.
type storeFinder struct{ f people.NamePostalFinder }

func (s storeFinder) FindByNamePostal(ctx context.Context, keys []PostalKey) ([][]people.Record, error) {
	nk := make([]people.NamePostalKey, len(keys))
	for i, k := range keys {
		nk[i] = people.NamePostalKey{Last: k.Last, Zip: k.Zip}
	}
	return s.f.FindByNamePostal(ctx, nk)
}
