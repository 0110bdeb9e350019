package people

import (
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBatch is the most items the bulk demographics API accepts in one
// request. Match itself takes any number.
const MaxBatch = 5000

// Field names of a person's identifiers: Input's JSON names, the REST
// API's query parameters and the list header fields (package peoplelist).
const (
	FieldEmail     = "email"
	FieldMD5Email  = "md5_email"
	FieldSHA1Email = "sha1_email"
	FieldFirst     = "first"
	FieldMiddle    = "middle"
	FieldLast      = "last"
	FieldStreet    = "street"
	FieldCity      = "city"
	FieldState     = "state"
	FieldZip       = "zip"
	FieldZip4      = "zip4"
)

// InputFields lists Input's fields in order.
var InputFields = []string{FieldEmail, FieldMD5Email, FieldSHA1Email, FieldFirst, FieldMiddle, FieldLast,
	FieldStreet, FieldCity, FieldState, FieldZip, FieldZip4}

// Input is one person to match: the bulk append input item.
type Input struct {
	// Email is a plain-text address; a 32- or 40-digit hex value here is
	// taken as an MD5 or SHA-1 digest. Any other non-email value matches
	// nothing (it is not an error).
	Email     string `json:"email,omitempty"`
	MD5Email  string `json:"md5_email,omitempty"`  // hex MD5 of the trimmed, lower-cased address
	SHA1Email string `json:"sha1_email,omitempty"` // hex SHA-1 of the trimmed, lower-cased address
	First     string `json:"first,omitempty"`
	Middle    string `json:"middle,omitempty"`
	Last      string `json:"last,omitempty"`
	Street    string `json:"street,omitempty"`
	City      string `json:"city,omitempty"`
	State     string `json:"state,omitempty"`
	Zip       string `json:"zip,omitempty"`
	// Zip4 is a ZIP+4 ("12345-6789"), used when Zip is empty.
	Zip4 string `json:"zip4,omitempty"`
}

// zip returns Zip, or Zip4 when Zip is empty.
func (in *Input) zip() string {
	if strings.TrimSpace(in.Zip) == "" {
		return in.Zip4
	}
	return in.Zip
}

// Level is how closely a match identifies the input person.
type Level uint8

const (
	// LevelNone: nothing matched.
	LevelNone Level = iota
	// LevelIndividual: the record is the input person.
	LevelIndividual
	// LevelHousehold: the record is of the input person's household, not
	// (known to be) the input person.
	LevelHousehold
)

func (l Level) String() string {
	switch l {
	case LevelIndividual:
		return "Individual"
	case LevelHousehold:
		return "Household"
	}
	return "None"
}

// MarshalText writes String.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// NameEvidence is the outcome of comparing the input name with a record's.
type NameEvidence uint8

const (
	// NameNotCompared: the input or the record has no first or last name
	// to compare.
	NameNotCompared NameEvidence = iota
	// NameFull: first and last name equal.
	NameFull
	// NamePartial: what could be compared agrees, but not both full first
	// and last name (only one of them, or a first initial).
	NamePartial
	// NameConflict: a first, middle (initial) or last name differs.
	NameConflict
)

// PostalEvidence is the outcome of comparing the input address with a
// record's.
type PostalEvidence uint8

const (
	// PostalNotCompared: no address field on both sides, or only a state or
	// only a city agreeing.
	PostalNotCompared PostalEvidence = iota
	// PostalFull: the street and the zip (or city and state) agree.
	PostalFull
	// PostalPartial: the zip, or city and state, or the street agree, and
	// nothing compared differs.
	PostalPartial
	// PostalConflict: a compared field differs.
	PostalConflict
)

// Evidence says what a match rests on.
type Evidence struct {
	// Key is what found the record: KeyEmail, KeyMD5 or KeySHA1, or
	// KeyNamePostal for a match by name and postal address alone.
	Key    KeyKind
	Name   NameEvidence
	Postal PostalEvidence
}

// MatchResult is the outcome for one Input.
type MatchResult struct {
	Level      Level
	Confidence int     // 0 to 100; 0 for LevelNone
	Record     *Record // nil for LevelNone
	Evidence   Evidence
}

// Confidence scores. A match is scored by adding points to a base; the
// bases are chosen so that every Individual match scores above every
// Household match (63..98 against 21..60) and a Household match through an
// identified member above one through the household alone.
const (
	scoreIndividual      = 72 // the email's owner, before name and postal points
	scoreHouseholdMember = 44 // a household member named like the input
	scoreHouseholdOnly   = 26 // the email's owner stands for the household
	penaltyHashed        = 5  // found through md5_email/sha1_email (or a digest in email)
	pointsFirstExact     = 12
	pointsFirstInitial   = 6
	pointsLast           = 8
	pointsPostalFull     = 6
	pointsPostalPartial  = 3
	pointsPostalConflict = -4
	pointsHouseholdLast  = 4
	// By name and postal address alone (no email found the person): an
	// Individual scores 60 + postal points (63 to 66, the lowest
	// Individual range), a Household 30 + postal points.
	scoreNamePostal          = 60
	scoreNamePostalHousehold = 30
)

// Match looks items up in s and returns one result per item, in order. It
// makes one LookupBatch call; when some inputs name a person other than
// the one the email belongs to, one HouseholdBatch call; and when some
// items are left unmatched (or have no email) but carry a name and postal
// address, and s implements NamePostalFinder, one FindByNamePostal call
// (see MatchNamePostal).
//
// Rules, for the record R found by an item's email (plain text, MD5 or
// SHA-1; when several are given, each is tried and the best result kept):
//
//   - Individual: the input name does not conflict with R's (equal,
//     compatible such as an initial, or absent). Confidence = 72 + name
//     points (first name 12, or 6 for an initial; last name 8) + postal
//     points (street with zip or city+state 6; zip or city+state or street
//     alone 3; a differing field −4) − 5 when found through a digest. So
//     email+name+postal (98) > email+name (92) > email alone (72), and the
//     same evidence through MD5 or SHA-1 scores 5 less (equal for both).
//   - Household, member identified: the input name conflicts with R's and
//     another member M of R's household has a compatible first name (and
//     no conflicting last or middle name). The record is M. Confidence =
//     44 + M's name points / 2 + postal points against M − 5 if hashed.
//     The best such member wins (ties: the first by email).
//   - Household, member not identified: the name conflicts with R's, R
//     has a household id and no member fits, but the input's last name
//     equals R's or another member's, or the address agrees with R's
//     (PostalFull or PostalPartial). The record is R, standing for the
//     household.
//     Confidence = 26 + 4 if the last name agrees + postal points − 5 if
//     hashed.
//   - By name and postal address: an item left with no match above that
//     HasNamePostal is matched by the email append rules (MatchNamePostal).
//     An Individual scores 60 + postal points (63..66), a Household 30 +
//     postal points; Evidence.Key is KeyNamePostal.
//   - None otherwise: no email key (missing, or not an address and not a
//     digest) and no name and postal address, no record, or a different
//     person with no link to the household.
//
// Names compare case-insensitively on their letters only ("O'Neil" equals
// "oneil"); addresses on a normalised street (suffixes and directions
// abbreviated, unit designators dropped), the 5-digit zip, the city's
// letters and the state code.
func Match(ctx context.Context, s Store, items []Input) ([]MatchResult, error) {
	out, err := matchEmail(ctx, s, items)
	if err != nil {
		return nil, err
	}
	if err := matchNamePostal(ctx, s, items, out); err != nil {
		return nil, err
	}
	return out, nil
}

// matchEmail is the email part of Match.
func matchEmail(ctx context.Context, s Store, items []Input) ([]MatchResult, error) {
	out := make([]MatchResult, len(items))
	var keys []Key
	var owner []int
	for i := range items {
		for _, k := range inputKeys(&items[i]) {
			keys = append(keys, k)
			owner = append(owner, i)
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	recs, err := s.LookupBatch(ctx, keys)
	if err != nil {
		return nil, err
	}
	type conflict struct {
		item int
		rec  *Record
		kind KeyKind
	}
	var conflicts []conflict
	for j, rec := range recs {
		if rec == nil {
			continue
		}
		i := owner[j]
		if res, ok := individual(&items[i], rec, keys[j].Kind); ok {
			if res.Confidence > out[i].Confidence {
				out[i] = res
			}
		} else {
			conflicts = append(conflicts, conflict{i, rec, keys[j].Kind})
		}
	}
	var ids []string
	for _, c := range conflicts {
		if out[c.item].Level != LevelIndividual && c.rec.HouseholdID != "" {
			ids = append(ids, c.rec.HouseholdID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	members := map[string][]Record{}
	if len(ids) > 0 {
		hh, err := s.HouseholdBatch(ctx, ids)
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			members[id] = hh[i]
		}
	}
	for _, c := range conflicts {
		if out[c.item].Level == LevelIndividual {
			continue
		}
		if res := household(&items[c.item], c.rec, c.kind, members[c.rec.HouseholdID]); res.Confidence > out[c.item].Confidence {
			out[c.item] = res
		}
	}
	return out, nil
}

// matchNamePostal matches the items left unmatched by email (or without
// one) by name and postal address, when s has that index.
func matchNamePostal(ctx context.Context, s Store, items []Input, out []MatchResult) error {
	f, ok := s.(NamePostalFinder)
	if !ok {
		return nil
	}
	var idx []int
	var rest []Input
	for i := range items {
		if out[i].Level == LevelNone && items[i].HasNamePostal() {
			idx = append(idx, i)
			rest = append(rest, items[i])
		}
	}
	if len(rest) == 0 {
		return nil
	}
	res, err := MatchNamePostal(ctx, f, rest)
	if err != nil {
		return err
	}
	for j, m := range res {
		if m.Level == LevelNone {
			continue
		}
		in := &items[idx[j]]
		postal, pp := comparePostal(in, m.Record)
		base := scoreNamePostal
		name := NameFull
		if m.Level == LevelHousehold {
			base, name = scoreNamePostalHousehold, NamePartial
		}
		out[idx[j]] = MatchResult{
			Level:      m.Level,
			Confidence: clamp(base+pp, 1, 100),
			Record:     m.Record,
			Evidence:   Evidence{KeyNamePostal, name, postal},
		}
	}
	return nil
}

// inputKeys returns the distinct keys an item can be found by, plain text
// first.
func inputKeys(in *Input) []Key {
	var keys []Key
	add := func(k Key) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if e := NormalizeEmail(in.Email); e != "" {
		switch {
		case ValidEmail(e):
			add(Key{KeyEmail, e})
		case isHex(e, 32):
			add(Key{KeyMD5, e})
		case isHex(e, 40):
			add(Key{KeySHA1, e})
		}
	}
	if h := strings.ToLower(strings.TrimSpace(in.MD5Email)); isHex(h, 32) {
		add(Key{KeyMD5, h})
	}
	if h := strings.ToLower(strings.TrimSpace(in.SHA1Email)); isHex(h, 40) {
		add(Key{KeySHA1, h})
	}
	return keys
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func keyPenalty(k KeyKind) int {
	if k == KeyEmail {
		return 0
	}
	return penaltyHashed
}

func individual(in *Input, r *Record, kind KeyKind) (MatchResult, bool) {
	name, np := compareName(in, r)
	if name == NameConflict {
		return MatchResult{}, false
	}
	postal, pp := comparePostal(in, r)
	return MatchResult{
		Level:      LevelIndividual,
		Confidence: clamp(scoreIndividual+np+pp-keyPenalty(kind), 1, 100),
		Record:     r,
		Evidence:   Evidence{kind, name, postal},
	}, true
}

func household(in *Input, r *Record, kind KeyKind, members []Record) MatchResult {
	if r.HouseholdID == "" {
		return MatchResult{}
	}
	best, bestPts := -1, 0
	for i := range members {
		m := &members[i]
		if m.Email == r.Email {
			continue
		}
		ev, pts := compareName(in, m)
		if ev == NameConflict || ev == NameNotCompared || !firstCompatible(in.First, m.First) {
			continue
		}
		if pts > bestPts {
			best, bestPts = i, pts
		}
	}
	if best >= 0 {
		m := &members[best]
		name, np := compareName(in, m)
		postal, pp := comparePostal(in, m)
		return MatchResult{
			Level:      LevelHousehold,
			Confidence: clamp(scoreHouseholdMember+np/2+pp-keyPenalty(kind), 1, 100),
			Record:     m,
			Evidence:   Evidence{kind, name, postal},
		}
	}
	hasLast := func(s string) bool { f, _ := nameInfo(s); return f >= 0 }
	lastAgrees := false
	if hasLast(in.Last) {
		lastAgrees = hasLast(r.Last) && nameEqual(in.Last, r.Last)
		for i := 0; !lastAgrees && i < len(members); i++ {
			lastAgrees = hasLast(members[i].Last) && nameEqual(in.Last, members[i].Last)
		}
	}
	postal, pp := comparePostal(in, r)
	if !lastAgrees && postal != PostalFull && postal != PostalPartial {
		return MatchResult{}
	}
	conf := scoreHouseholdOnly + pp - keyPenalty(kind)
	if lastAgrees {
		conf += pointsHouseholdLast
	}
	return MatchResult{
		Level:      LevelHousehold,
		Confidence: clamp(conf, 1, 100),
		Record:     r,
		Evidence:   Evidence{kind, NameConflict, postal},
	}
}

// nextLetter returns the lower-cased letter at or after byte i of s and
// the index after it, or -1 at the end.
func nextLetter(s string, i int) (rune, int) {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'a' && c <= 'z':
				return rune(c), i
			case c >= 'A' && c <= 'Z':
				return rune(c + 'a' - 'A'), i
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if unicode.IsLetter(r) {
			return unicode.ToLower(r), i
		}
	}
	return -1, -1
}

// nameInfo returns the first letter (lower-cased, -1 for none) of s and
// whether it has more than one letter.
func nameInfo(s string) (first rune, long bool) {
	first, i := nextLetter(s, 0)
	if first < 0 {
		return -1, false
	}
	r, _ := nextLetter(s, i)
	return first, r >= 0
}

// nameEqual compares the letters of a and b case-insensitively, ignoring
// everything else ("O'Neil" equals "oneil"; "Fort Collins" equals
// "fortcollins").
func nameEqual(a, b string) bool {
	i, j := 0, 0
	for {
		var ra, rb rune
		ra, i = nextLetter(a, i)
		rb, j = nextLetter(b, j)
		if ra != rb {
			return false
		}
		if ra < 0 {
			return true
		}
	}
}

// firstCompatible: both have letters and are equal, or one is an initial
// of the other.
func firstCompatible(a, b string) bool {
	fa, longA := nameInfo(a)
	fb, longB := nameInfo(b)
	if fa < 0 || fb < 0 || fa != fb {
		return false
	}
	return !longA || !longB || nameEqual(a, b)
}

// compareName compares the input name with r's and returns the evidence and
// its points (first name 12, or 6 for an initial on either side; last name
// 8).
func compareName(in *Input, r *Record) (NameEvidence, int) {
	pts, compared, full := 0, false, true
	f1, long1 := nameInfo(in.First)
	f2, long2 := nameInfo(r.First)
	if f1 >= 0 && f2 >= 0 {
		compared = true
		switch {
		case f1 != f2:
			return NameConflict, 0
		case long1 && long2:
			if !nameEqual(in.First, r.First) {
				return NameConflict, 0
			}
			pts += pointsFirstExact
		default: // an initial on either side
			pts += pointsFirstInitial
			full = false
		}
	} else {
		full = false
	}
	l1, _ := nameInfo(in.Last)
	l2, _ := nameInfo(r.Last)
	if l1 >= 0 && l2 >= 0 {
		compared = true
		if !nameEqual(in.Last, r.Last) {
			return NameConflict, 0
		}
		pts += pointsLast
	} else {
		full = false
	}
	if m1, _ := nameInfo(in.Middle); m1 >= 0 {
		if m2, _ := nameInfo(r.Middle); m2 >= 0 && m1 != m2 {
			return NameConflict, 0
		}
	}
	switch {
	case !compared:
		return NameNotCompared, 0
	case full:
		return NameFull, pts
	}
	return NamePartial, pts
}

// comparePostal compares the input address with r's.
func comparePostal(in *Input, r *Record) (PostalEvidence, int) {
	var streetOK, zipOK, cityOK, stateOK, any bool
	// Each comparison runs only when both sides are given.
	if z := in.zip(); z != "" && r.Zip != "" {
		if a, b := zip5(z), zip5(r.Zip); a != "" && b != "" {
			any, zipOK = true, a == b
			if !zipOK {
				return PostalConflict, pointsPostalConflict
			}
		}
	}
	if st := strings.TrimSpace(in.State); st != "" && r.State != "" {
		any, stateOK = true, strings.EqualFold(st, r.State)
		if !stateOK {
			return PostalConflict, pointsPostalConflict
		}
	}
	if in.City != "" && r.City != "" {
		any, cityOK = true, nameEqual(in.City, r.City)
		if !cityOK {
			return PostalConflict, pointsPostalConflict
		}
	}
	if in.Street != "" && r.Street != "" {
		any = true
		streetOK = strings.EqualFold(strings.TrimSpace(in.Street), r.Street) || normStreet(in.Street) == normStreet(r.Street)
		if !streetOK {
			return PostalConflict, pointsPostalConflict
		}
	}
	if !any {
		return PostalNotCompared, 0
	}
	locality := zipOK || cityOK && stateOK
	switch {
	case streetOK && locality:
		return PostalFull, pointsPostalFull
	case streetOK || locality:
		return PostalPartial, pointsPostalPartial
	}
	return PostalNotCompared, 0
}

// zip5 returns the 5-digit zip of s ("02138-1234" -> "02138"), restoring
// leading zeros lost by spreadsheets ("2138" -> "02138"), or "".
// NormalizeZip returns the 5-digit zip of s ("02138-1234" -> "02138"),
// restoring leading zeros lost by spreadsheets, or "" when s is no zip.
// Matchers outside this package compare zips the same way.
func NormalizeZip(s string) string { return zip5(s) }

// NormalizeStreet is the street form Match compares: lower-case, suffixes
// and directions abbreviated, any unit dropped.
func NormalizeStreet(s string) string { return normStreet(s) }

func zip5(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '-'); i >= 0 {
		s = s[:i]
	}
	if len(s) == 9 {
		s = s[:5]
	}
	if !isDigits(s) || len(s) > 5 || len(s) < 3 {
		return ""
	}
	return strings.Repeat("0", 5-len(s)) + s
}

var streetAbbrev = map[string]string{
	"street": "st", "avenue": "ave", "av": "ave", "road": "rd", "drive": "dr",
	"lane": "ln", "court": "ct", "boulevard": "blvd", "place": "pl",
	"terrace": "ter", "circle": "cir", "parkway": "pkwy", "highway": "hwy",
	"way": "way", "square": "sq", "trail": "trl",
	"north": "n", "south": "s", "east": "e", "west": "w",
	"northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw",
}

var unitWords = map[string]bool{"apt": true, "apartment": true, "unit": true, "ste": true, "suite": true, "#": true}

// normStreet lower-cases the street, abbreviates suffixes and directions,
// and drops a unit ("Apt 5", "#5") and everything after it.
func normStreet(s string) string {
	s = strings.ReplaceAll(strings.ToLower(s), "#", " # ")
	var toks []string
	for t := range strings.FieldsFuncSeq(s, func(c rune) bool {
		return !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '#')
	}) {
		if unitWords[t] {
			break
		}
		if a, ok := streetAbbrev[t]; ok {
			t = a
		}
		toks = append(toks, t)
	}
	return strings.Join(toks, " ")
}
