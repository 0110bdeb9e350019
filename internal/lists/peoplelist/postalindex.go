package peoplelist

import (
	"context"
	"iter"
	"strings"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// PostalKey is one name/postal lookup: a last name and a zip, or a last
// name, a city and a state (people.NamePostalKey).
type PostalKey = people.NamePostalKey

// PostalFinder is the name/postal index email_append needs
// (people.NamePostalFinder). The bolt and PostgreSQL stores implement it;
// PostalIndex is an in-memory one. The order of a key's records must be
// stable: email_append takes the first of a household as its primary
// member.
type PostalFinder = people.NamePostalFinder

// PostalIndex is an in-memory PostalFinder: maps from normalised last name
// and zip, and from normalised last name, state and city, to the people, in
// load order. It keeps the name, address, email and household id of each
// person, not the demographics. It is read-only once built, so
// FindByNamePostal may run concurrently.
type PostalIndex struct {
	byKey map[postalKey][]people.Record
	n     int
}

// postalKey is a zip key (zip set) or a locality key (city and state set).
type postalKey struct{ last, zip, city, state string }

// keysOf returns the zip and locality keys of a person (ok false for none).
func keysOf(r *people.Record) (zk postalKey, zok bool, lk postalKey, lok bool) {
	last := normName(r.Last)
	zk = postalKey{last: last, zip: zip5(r.Zip)}
	lk = postalKey{last: last, city: normName(r.City), state: normState(r.State)}
	return zk, last != "" && zk.zip != "", lk, last != "" && lk.city != "" && lk.state != ""
}

// lookupKey is the key FindByNamePostal looks k up by: the zip when valid,
// else the city and state.
func lookupKey(k PostalKey) (postalKey, bool) {
	last := normName(k.Last)
	if z := zip5(k.Zip); z != "" {
		return postalKey{last: last, zip: z}, last != ""
	}
	lk := postalKey{last: last, city: normName(k.City), state: normState(k.State)}
	return lk, last != "" && lk.city != "" && lk.state != ""
}

func normState(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) != 2 || s[0] < 'A' || s[0] > 'Z' || s[1] < 'A' || s[1] > 'Z' {
		return ""
	}
	return s
}

// NewPostalIndex indexes recs (for example people.Generate, or
// slices.Values of a slice). Records without a last name or a valid zip are
// skipped. A record whose email repeats an earlier one replaces it (the last
// wins, as in people.Store.Upsert).
func NewPostalIndex(recs iter.Seq[people.Record]) *PostalIndex {
	ix := &PostalIndex{byKey: map[postalKey][]people.Record{}}
	seen := map[string][]postalKey{}
	for r := range recs {
		r.Normalize()
		if old, ok := seen[r.Email]; ok {
			for _, k := range old {
				ix.remove(k, r.Email)
			}
			delete(seen, r.Email)
			ix.n--
		}
		if r.Email == "" {
			continue
		}
		zk, zok, lk, lok := keysOf(&r)
		entry := people.Record{
			Email: r.Email, First: r.First, Middle: r.Middle, Last: r.Last,
			Street: r.Street, City: r.City, State: r.State, Zip: r.Zip,
			HouseholdID: r.HouseholdID,
		}
		var keys []postalKey
		if zok {
			keys = append(keys, zk)
		}
		if lok {
			keys = append(keys, lk)
		}
		if len(keys) == 0 {
			continue
		}
		for _, k := range keys {
			ix.byKey[k] = append(ix.byKey[k], entry)
		}
		seen[r.Email] = keys
		ix.n++
	}
	return ix
}

func (ix *PostalIndex) remove(k postalKey, email string) {
	l := ix.byKey[k]
	for i := range l {
		if l[i].Email == email {
			ix.byKey[k] = append(l[:i:i], l[i+1:]...)
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
		if nk, ok := lookupKey(k); ok {
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
