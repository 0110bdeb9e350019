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

// NamePostalKey is one name/postal lookup: a last name and a zip. Finders
// normalise both (NormalizeName, NormalizeZip).
type NamePostalKey struct {
	Last string
	Zip  string
}

// norm returns the normalised last name and 5-digit zip of k, and false
// when k can never match (no letters or no valid zip).
func (k NamePostalKey) norm() (last, zip string, ok bool) {
	last, zip = NormalizeName(k.Last), NormalizeZip(k.Zip)
	return last, zip, last != "" && zip != ""
}

// NamePostalFinder looks people up by last name and zip. Both built-in
// stores (bolt and PostgreSQL) implement it.
type NamePostalFinder interface {
	// FindByNamePostal returns, for each key, the people whose normalised
	// last name and 5-digit zip equal the key's, ordered by email (nil when
	// none, or when the key has no letters or no valid zip), aligned with
	// keys.
	FindByNamePostal(ctx context.Context, keys []NamePostalKey) ([][]Record, error)
}

var (
	_ NamePostalFinder = (*boltStore)(nil)
	_ NamePostalFinder = (*pgStore)(nil)
)
