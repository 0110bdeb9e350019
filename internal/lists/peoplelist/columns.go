package peoplelist

import (
	"strings"

	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// Service names, as registered in a listservice.Registry.
const (
	NameEmailIntelligence = services.EmailIntelligence
	NameEmailAppend       = services.EmailAppend
)

// Person fields that input header columns can name (people owns the names).
const (
	FieldFirst  = people.FieldFirst
	FieldMiddle = people.FieldMiddle
	FieldLast   = people.FieldLast
	FieldStreet = people.FieldStreet
	FieldCity   = people.FieldCity
	FieldState  = people.FieldState
	FieldZip    = people.FieldZip
)

// HeaderAliases lists, for each person field, the header names taken to
// mean it. Header names are compared after lower-casing and dropping
// everything but ASCII letters and digits, so "First Name", "first_name"
// and "FIRST-NAME" all mean first.
var HeaderAliases = map[string][]string{
	FieldFirst:  {"first", "first_name", "firstname", "fname", "given_name"},
	FieldMiddle: {"middle", "middle_name", "middlename", "mname", "middle_initial"},
	FieldLast:   {"last", "last_name", "lastname", "lname", "surname", "family_name"},
	FieldStreet: {"street", "street_address", "address", "address1", "address_1", "address_line_1", "addr"},
	FieldCity:   {"city", "town"},
	FieldState:  {"state", "st", "state_code", "province"},
	FieldZip:    {"zip", "zip_code", "zipcode", "zip5", "postal_code", "postalcode", "postcode"},
}

// personFields is the order fields are resolved in.
var personFields = []string{FieldFirst, FieldMiddle, FieldLast, FieldStreet, FieldCity, FieldState, FieldZip}

var aliasField = func() map[string]string {
	m := map[string]string{}
	for f, names := range HeaderAliases {
		for _, n := range names {
			m[headerKey(n)] = f
		}
	}
	return m
}()

// headerKey lower-cases a header name and keeps its ASCII letters and
// digits only.
func headerKey(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		}
	}
	return b.String()
}

// columnMap gives the 0-based input column of each person field, -1 when
// the header does not name it.
type columnMap struct {
	first, middle, last, street, city, state, zip int
}

// mapColumns resolves the person fields in header; the first column naming
// a field wins, and the email column is never taken for one. A nil header
// maps nothing.
func mapColumns(header []string, emailCol int) columnMap {
	m := columnMap{-1, -1, -1, -1, -1, -1, -1}
	for i, h := range header {
		if i == emailCol {
			continue
		}
		f, ok := aliasField[headerKey(h)]
		if !ok {
			continue
		}
		p := m.ptr(f)
		if *p < 0 {
			*p = i
		}
	}
	return m
}

func (m *columnMap) ptr(field string) *int {
	switch field {
	case FieldFirst:
		return &m.first
	case FieldMiddle:
		return &m.middle
	case FieldLast:
		return &m.last
	case FieldStreet:
		return &m.street
	case FieldCity:
		return &m.city
	case FieldState:
		return &m.state
	}
	return &m.zip
}

// normName keeps the letters of s, lower-cased ("O'Neil" -> "oneil"), the
// way people.Match compares names and the stores key their name/postal
// index.
var normName = people.NormalizeName

// zip5 and normStreet compare the way people.Match does.
var (
	zip5       = people.NormalizeZip
	normStreet = people.NormalizeStreet
)
