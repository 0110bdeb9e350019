// Package norm normalises and validates list entries: domains and local
// parts. It is shared by the runtime loader (emaillists.LoadExtra) and the
// generator of the embedded lists (internal/listgen), so both agree on what
// an entry looks like.
package norm

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Local lower-cases (ASCII) and checks a dot-atom local part; UTF-8
// (SMTPUTF8) is allowed, quoted local parts are not.
func Local(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty local part")
	}
	if len(s) > 64 {
		return "", errors.New("local part longer than 64 bytes")
	}
	if !utf8.ValidString(s) {
		return "", errors.New("local part is not valid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x80 || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			strings.IndexByte("!#$%&'*+-/=?^_`{|}~.", b) >= 0 {
			continue
		}
		return "", fmt.Errorf("character %q not allowed in a local part", rune(b))
	}
	return ASCIILower(s), nil
}

var idnaProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false))

// Domain returns the lower-case ASCII form of a domain name with at
// least two labels, refusing public suffixes such as "com" or "co.uk" (which
// would cover whole registries).
func Domain(s string) (string, error) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", errors.New("empty domain")
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		s = ASCIILower(s)
	} else {
		a, err := idnaProfile.ToASCII(s)
		if err != nil {
			return "", fmt.Errorf("not a valid internationalised domain name: %v", err)
		}
		s = a
	}
	if len(s) > 253 {
		return "", errors.New("domain longer than 253 bytes")
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return "", errors.New("want a domain with at least two labels, such as \"example.com\"")
	}
	for _, l := range labels {
		if l == "" {
			return "", errors.New("empty label")
		}
		if len(l) > 63 {
			return "", errors.New("label longer than 63 bytes")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("label starts or ends with '-'")
		}
		for i := 0; i < len(l); i++ {
			b := l[i]
			if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-') {
				return "", fmt.Errorf("character %q not allowed in a domain", rune(b))
			}
		}
	}
	if suffix, icann := PublicSuffix(s); suffix && icann {
		return "", errors.New("an ICANN public suffix (like \"co.uk\"), not a domain one can register")
	}
	return s, nil
}

// ASCIILower lower-cases ASCII letters only, leaving other bytes alone; it
// does not allocate when s has no upper-case ASCII letter.
func ASCIILower(s string) string {
	for i := 0; i < len(s); i++ {
		if b := s[i]; 'A' <= b && b <= 'Z' {
			buf := []byte(s)
			for j := i; j < len(buf); j++ {
				if b := buf[j]; 'A' <= b && b <= 'Z' {
					buf[j] = b + 'a' - 'A'
				}
			}
			return string(buf)
		}
	}
	return s
}

// Registrable reports whether d is a registrable domain: its own eTLD+1 (so
// "gmail.com" and "0-mailer.dynv6.net" are, "mail.bbexcite.jp" is not).
func Registrable(d string) bool {
	r, err := publicsuffix.EffectiveTLDPlusOne(d)
	return err == nil && r == d
}

// PublicSuffix reports whether d is itself a public suffix, and whether it is
// an ICANN one ("co.uk", "edu.pl") rather than a private one ("ddns.net").
func PublicSuffix(d string) (suffix, icann bool) {
	ps, icann := publicsuffix.PublicSuffix(d)
	return ps == d, icann
}
