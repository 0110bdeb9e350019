// Package phone parses and classifies telephone numbers with
// libphonenumber's metadata (github.com/nyaruka/phonenumbers): validity,
// line type, region, calling code and, where the library's carrier data
// knows it, the carrier. It is the one place that names line types, for
// GET /pv, GET /fr and the phone status reference data.
package phone

import (
	"errors"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Line types (the line_type values of GET /pv and risk.phone.line_type).
const (
	LineLandline         = "landline"
	LineMobile           = "mobile"
	LineLandlineOrMobile = "landline_or_mobile"
	LineTollFree         = "toll_free"
	LinePremiumRate      = "premium_rate"
	LineSharedCost       = "shared_cost"
	LineVOIP             = "voip"
	LinePersonal         = "personal"
	LinePager            = "pager"
	LineUAN              = "uan"
	LineVoicemail        = "voicemail"
	LineUnknown          = "unknown"
)

var lineTypes = map[phonenumbers.PhoneNumberType]string{
	phonenumbers.FIXED_LINE:           LineLandline,
	phonenumbers.MOBILE:               LineMobile,
	phonenumbers.FIXED_LINE_OR_MOBILE: LineLandlineOrMobile,
	phonenumbers.TOLL_FREE:            LineTollFree,
	phonenumbers.PREMIUM_RATE:         LinePremiumRate,
	phonenumbers.SHARED_COST:          LineSharedCost,
	phonenumbers.VOIP:                 LineVOIP,
	phonenumbers.PERSONAL_NUMBER:      LinePersonal,
	phonenumbers.PAGER:                LinePager,
	phonenumbers.UAN:                  LineUAN,
	phonenumbers.VOICEMAIL:            LineVoicemail,
	phonenumbers.UNKNOWN:              LineUnknown,
}

// LineType names a libphonenumber number type.
func LineType(t phonenumbers.PhoneNumberType) string {
	if s, ok := lineTypes[t]; ok {
		return s
	}
	return LineUnknown
}

// DefaultRegion parses national-format numbers when no region is given.
const DefaultRegion = "US"

// MaxInputLen bounds a phone number as written (digits, spaces and
// punctuation).
const MaxInputLen = 64

// ErrMalformed is returned for input that is not a phone number at all:
// too long, no digit, or characters other than digits, spaces and the
// punctuation people write numbers with (+ - . ( ) /).
var ErrMalformed = errors.New("phone: not a phone number")

// Number is a parsed number.
type Number struct {
	// Digits are the input's digits, for an answer about an invalid number.
	Digits string
	// Valid reports whether the number is valid for its region (the
	// fields below are set only then).
	Valid bool
	// E164 is "+" and the calling code and national number.
	E164 string
	// Region is the ISO 3166 alpha-2 code of the number's region, "" for
	// non-geographic numbers (satellite, international services).
	Region      string
	CallingCode int
	LineType    string
	// Carrier is the original carrier of the number's prefix from the
	// library's carrier data, "" when it has none (it has data for mobile
	// ranges mostly; numbers may have been ported since).
	Carrier string
}

// Region returns the upper-cased region code of an ISO 3166 alpha-2 code
// ("UK" is taken for GB) that has a calling code, and false otherwise.
func Region(s string) (string, bool) {
	c := strings.ToUpper(strings.TrimSpace(s))
	if c == "UK" {
		c = "GB"
	}
	if len(c) != 2 || phonenumbers.GetCountryCodeForRegion(c) == 0 {
		return "", false
	}
	return c, true
}

// wellFormed checks the characters of raw and returns its digits.
func wellFormed(raw string) (string, bool) {
	if len(raw) > MaxInputLen {
		return "", false
	}
	var d strings.Builder
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c >= '0' && c <= '9':
			d.WriteByte(c)
		case c == ' ' || c == '+' || c == '-' || c == '.' || c == '(' || c == ')' || c == '/' || c == '\t':
		default:
			return "", false
		}
	}
	return d.String(), d.Len() > 0
}

// Parse parses raw, a number in international form ("+1 415 555 2671") or
// national form of region (DefaultRegion when ""). It fails with
// ErrMalformed for input that is not a phone number; a number that parses
// but is not valid comes back with Valid false.
func Parse(raw, region string) (Number, error) {
	raw = strings.TrimSpace(raw)
	digits, ok := wellFormed(raw)
	if !ok {
		return Number{}, ErrMalformed
	}
	if region == "" {
		region = DefaultRegion
	}
	n := Number{Digits: digits}
	num, err := phonenumbers.Parse(raw, region)
	if err != nil || !phonenumbers.IsValidNumber(num) {
		return n, nil
	}
	n.Valid = true
	n.E164 = phonenumbers.Format(num, phonenumbers.E164)
	n.CallingCode = int(num.GetCountryCode())
	if r := phonenumbers.GetRegionCodeForNumber(num); r != "" && r != phonenumbers.UNKNOWN_REGION && r != "001" {
		n.Region = r
	}
	n.LineType = LineType(phonenumbers.GetNumberType(num))
	if c, err := phonenumbers.GetCarrierForNumber(num, "en"); err == nil {
		n.Carrier = c
	}
	return n, nil
}

// E164Digits is E164 without its "+".
func (n Number) E164Digits() string { return strings.TrimPrefix(n.E164, "+") }
