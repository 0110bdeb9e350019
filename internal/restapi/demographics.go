package restapi

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// The demographic answer of GET /v5/td and POST /v5/ei/bulk (one renderer
// for both): the published fields of the matched record that have a value,
// in this order, then interests (an object of booleans), then our
// match_level and match_confidence. All values are strings except
// interests and match_confidence.
const (
	fieldInterests       = people.ColInterests
	fieldMatchLevel      = "match_level"
	fieldMatchConfidence = "match_confidence"
	// fieldEmailValidation is GET /v5/td's verification object.
	fieldEmailValidation = "email_validation"
)

// demographicValueFields are the string fields, in output order.
var demographicValueFields = func() []string {
	f := []string{people.ColAge, people.ColGender, people.ColZip}
	for _, c := range people.DemographicColumns() {
		if c != people.ColAge && c != people.ColGender {
			f = append(f, c)
		}
	}
	return f
}()

// demographicGetters read demographicValueFields, in order.
var demographicGetters = func() []func(*people.Record) string {
	g := make([]func(*people.Record) string, len(demographicValueFields))
	for i, name := range demographicValueFields {
		g[i] = people.Getter(name)
	}
	return g
}()

// demographicFields are the names a bulk request's fields parameter may
// list, in output order.
var demographicFields = slices.Concat(demographicValueFields, []string{fieldInterests, fieldMatchLevel, fieldMatchConfidence})

// tdFields are the names GET /v5/td's fields parameter may list.
var tdFields = append(slices.Clone(demographicFields), fieldEmailValidation)

// fieldSet is a parsed fields parameter; nil means every field.
type fieldSet map[string]bool

func (f fieldSet) has(name string) bool { return f == nil || f[name] }

// parseFields parses a comma-separated fields parameter against known.
// Empty names are skipped; an unknown name is returned as bad. An empty
// parameter gives nil (every field).
func parseFields(param string, known []string) (fs fieldSet, bad string) {
	if strings.TrimSpace(param) == "" {
		return nil, ""
	}
	fs = fieldSet{}
	for name := range strings.SplitSeq(param, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(known, name) {
			return nil, name
		}
		fs[name] = true
	}
	return fs, ""
}

// appendDemographicFields appends the fields of m that fs selects, as JSON
// members ("name":value, comma-separated, no braces), and returns how many
// it wrote. Nothing is written for LevelNone.
func appendDemographicFields(b []byte, m *people.MatchResult, fs fieldSet) ([]byte, int) {
	if m.Record == nil || m.Level == people.LevelNone {
		return b, 0
	}
	n := 0
	member := func(name string) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendJSONString(b, name)
		b = append(b, ':')
	}
	rec := m.Record
	for i, name := range demographicValueFields {
		if v := demographicGetters[i](rec); v != "" && fs.has(name) {
			member(name)
			b = appendJSONString(b, v)
		}
	}
	if rec.Interests != 0 && fs.has(fieldInterests) {
		member(fieldInterests)
		b = append(b, '{')
		for i, name := range people.Buckets(people.ColInterests) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, name)
			b = append(b, ':')
			b = strconv.AppendBool(b, rec.Interests.Has(name))
		}
		b = append(b, '}')
	}
	if fs.has(fieldMatchLevel) {
		member(fieldMatchLevel)
		b = appendJSONString(b, m.Level.String())
	}
	if fs.has(fieldMatchConfidence) {
		member(fieldMatchConfidence)
		b = strconv.AppendInt(b, int64(m.Confidence), 10)
	}
	return b, n
}

// appendDemographics appends the JSON object of one match: {} when nothing
// matched.
func appendDemographics(b []byte, m *people.MatchResult, fs fieldSet) []byte {
	b = append(b, '{')
	b, _ = appendDemographicFields(b, m, fs)
	return append(b, '}')
}

// invalidIdentifier is the bulk item answer for an unusable identifier.
const invalidIdentifier = `{"error_code":400,"error_msg":"Invalid identifier"}`

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping as encoding/json
// does (control characters, quotes, backslashes, and <, >, & for HTML
// safety; invalid UTF-8 becomes U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			switch r {
			case '\u2028':
				b = append(b, `\u2028`...)
			case '\u2029':
				b = append(b, `\u2029`...)
			default:
				b = append(b, `\ufffd`...)
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
