package people

import (
	"context"
	"fmt"
	"strings"
)

// Matching by name and postal address, without an email: the email append
// rules, shared by the email_append list service, GET /v5/eppend, and
// Match for items whose email finds nobody (or that have none).
//
// For an item, the candidates are the people sharing its last name and
// 5-digit zip (or, without a valid zip, its last name, city and state)
// whose street, city and state do not conflict with the item's (both
// given and different). Then:
//
//   - Individual: exactly one candidate has the item's first name
//     (compared on letters only, case-insensitively).
//   - Household: otherwise, when the item has a street and the candidates
//     whose street agrees with it (normalised) all belong to one household
//     (a candidate without a household id is its own). The record is the
//     household's primary member: the first of those candidates in the
//     finder's order (for the stores, by email). Several candidates with
//     the item's first name in one household also give a Household match.
//   - None otherwise, including ambiguous matches spanning households.

// NamePostalMatch is the outcome of matching one item by name and postal
// address.
type NamePostalMatch struct {
	Level  Level   // LevelNone, LevelIndividual or LevelHousehold
	Record *Record // the person, or the household's primary member; nil for LevelNone
	// Street reports whether the street was compared and agreed.
	Street bool
}

// NamePostalKeyOf returns the finder key of an item, and false when the item
// cannot be matched by name and postal address (see HasNamePostal).
func NamePostalKeyOf(in *Input) (NamePostalKey, bool) {
	if !in.HasNamePostal() {
		return NamePostalKey{}, false
	}
	return NamePostalKey{Last: in.Last, Zip: in.zip(), City: in.City, State: in.State}, true
}

// HasNamePostal reports whether in can be matched by name and postal
// address: a last name with letters, a valid zip (zip or zip4) or a city
// with letters and a two-letter state, and a first name with letters or a
// street.
func (in *Input) HasNamePostal() bool {
	if _, ok := (NamePostalKey{Last: in.Last, Zip: in.zip(), City: in.City, State: in.State}).norm(); !ok {
		return false
	}
	return NormalizeName(in.First) != "" || strings.TrimSpace(in.Street) != ""
}

// MatchNamePostal matches items by name and postal address with one
// FindByNamePostal call for the distinct keys; the result is aligned with
// items (LevelNone for items without a key).
func MatchNamePostal(ctx context.Context, f NamePostalFinder, items []Input) ([]NamePostalMatch, error) {
	out := make([]NamePostalMatch, len(items))
	var keys []NamePostalKey
	keyOf := make([]int, len(items))
	index := map[normKey]int{}
	for i := range items {
		keyOf[i] = -1
		k, ok := NamePostalKeyOf(&items[i])
		if !ok {
			continue
		}
		nk, _ := k.norm()
		j, seen := index[nk]
		if !seen {
			j = len(keys)
			index[nk] = j
			keys = append(keys, k)
		}
		keyOf[i] = j
	}
	if len(keys) == 0 {
		return out, nil
	}
	found, err := f.FindByNamePostal(ctx, keys)
	if err != nil {
		return nil, err
	}
	if len(found) != len(keys) {
		return nil, fmt.Errorf("people: name/postal lookup returned %d results for %d keys", len(found), len(keys))
	}
	for i := range items {
		if keyOf[i] >= 0 {
			out[i] = decideNamePostal(&items[i], found[keyOf[i]])
		}
	}
	return out, nil
}

// napQuery is an item's name and address, normalised.
type napQuery struct {
	first, last, street, city, state, zip string
}

// decideNamePostal applies the rules above to one item and the candidates
// its key found.
func decideNamePostal(in *Input, cands []Record) NamePostalMatch {
	q := napQuery{
		first:  NormalizeName(in.First),
		last:   NormalizeName(in.Last),
		street: normStreet(in.Street),
		city:   NormalizeName(in.City),
		state:  strings.ToUpper(strings.TrimSpace(in.State)),
		zip:    zip5(in.zip()),
	}
	// Candidates consistent with the item's address, and really sharing
	// its key, whatever the finder's normalisation.
	var ok []*Record
	for i := range cands {
		r := &cands[i]
		if NormalizeName(r.Last) != q.last {
			continue
		}
		if q.zip != "" && zip5(r.Zip) != q.zip ||
			q.zip == "" && (NormalizeName(r.City) != q.city || !strings.EqualFold(r.State, q.state)) {
			continue
		}
		if q.street != "" && r.Street != "" && normStreet(r.Street) != q.street ||
			q.city != "" && r.City != "" && NormalizeName(r.City) != q.city ||
			q.state != "" && r.State != "" && !strings.EqualFold(r.State, q.state) {
			continue
		}
		ok = append(ok, r)
	}
	var named []*Record
	if q.first != "" {
		for _, r := range ok {
			if NormalizeName(r.First) == q.first {
				named = append(named, r)
			}
		}
	}
	if len(named) == 1 {
		r := named[0]
		return NamePostalMatch{Level: LevelIndividual, Record: r, Street: q.street != "" && r.Street != ""}
	}
	if q.street == "" {
		return NamePostalMatch{}
	}
	var primary *Record
	group := ""
	for _, r := range ok {
		if r.Street == "" || normStreet(r.Street) != q.street {
			continue
		}
		g := r.HouseholdID
		if g == "" {
			g = "\x00" + r.Email
		}
		switch {
		case primary == nil:
			primary, group = r, g
		case g != group:
			return NamePostalMatch{} // ambiguous: more than one household
		}
	}
	if primary == nil {
		return NamePostalMatch{}
	}
	return NamePostalMatch{Level: LevelHousehold, Record: primary, Street: true}
}
