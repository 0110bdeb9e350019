package people

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NormalizeName keeps the letters of s, lower-cased ("O'Neil" -> "oneil"),
// the way Match compares names. It is the form the name/postal index keys
// last names by.
func NormalizeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'a' && c <= 'z':
				b.WriteByte(c)
			case c >= 'A' && c <= 'Z':
				b.WriteByte(c + 'a' - 'A')
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if unicode.IsLetter(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// NamePostalKey is one name/postal lookup: a last name and a zip, or,
// when Zip is not a valid zip, a last name, a city and a state. Finders
// normalise all of them (NormalizeName, NormalizeZip, upper-case state).
type NamePostalKey struct {
	Last  string
	Zip   string
	City  string
	State string
}

// normKey is a NamePostalKey normalised: zip set, or city and state set.
type normKey struct{ last, zip, city, state string }

// norm returns the normalised key, and false when k can never match (no
// letters in the last name, and neither a valid zip nor a city with
// letters and a two-letter state).
func (k NamePostalKey) norm() (normKey, bool) {
	n := normKey{last: NormalizeName(k.Last), zip: NormalizeZip(k.Zip)}
	if n.last == "" {
		return n, false
	}
	if n.zip != "" {
		return n, true
	}
	n.city, n.state = NormalizeName(k.City), normState(k.State)
	return n, n.city != "" && n.state != ""
}

// normState returns the upper-cased two-letter state code of s, or "".
func normState(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) != 2 || !isUpperAlpha(s) {
		return ""
	}
	return s
}

// NamePostalFinder looks people up by last name and zip. Both built-in
// stores (bolt and PostgreSQL) implement it.
type NamePostalFinder interface {
	// FindByNamePostal returns, for each key, the people whose normalised
	// last name and 5-digit zip equal the key's (for a key without a valid
	// zip: whose last name, city and state do), ordered by email (nil when
	// none, or when the key can never match), aligned with keys.
	FindByNamePostal(ctx context.Context, keys []NamePostalKey) ([][]Record, error)
}

var (
	_ NamePostalFinder = (*boltStore)(nil)
	_ NamePostalFinder = (*pgStore)(nil)
)
