package people

import (
	"errors"
	"strings"
)

// ErrNoIdentifier is returned by Input.Check for an item with neither an
// email key nor a name and postal address.
var ErrNoIdentifier = errors.New("people: no identifier: give email, md5_email or sha1_email, or a first and last name with a zip or a city and state")

// InvalidIdentifierError is returned by Input.Check for an identifier
// field that was given but cannot be used. It names the field, never the
// value.
type InvalidIdentifierError struct {
	Field string // "email", "md5_email" or "sha1_email"
}

func (e *InvalidIdentifierError) Error() string {
	return "people: " + e.Field + " is not a usable identifier"
}

// Check reports whether in can be matched: an email that is an address
// (or a 32- or 40-digit hex digest), and md5_email and sha1_email, when
// given, must be hex digests of their length (an *InvalidIdentifierError
// names the first that is not); and the item needs one of them or a name
// and postal address (HasNamePostal), else ErrNoIdentifier.
func (in *Input) Check() error {
	if e := NormalizeEmail(in.Email); e != "" && !ValidEmail(e) && !isHex(e, 32) && !isHex(e, 40) {
		return &InvalidIdentifierError{Field: "email"}
	}
	if h := strings.ToLower(strings.TrimSpace(in.MD5Email)); h != "" && !isHex(h, 32) {
		return &InvalidIdentifierError{Field: "md5_email"}
	}
	if h := strings.ToLower(strings.TrimSpace(in.SHA1Email)); h != "" && !isHex(h, 40) {
		return &InvalidIdentifierError{Field: "sha1_email"}
	}
	if len(inputKeys(in)) == 0 && !in.HasNamePostal() {
		return ErrNoIdentifier
	}
	return nil
}

// Keys returns the lookup keys of in's email identifiers (email, or a
// digest given in it, md5_email, sha1_email), each once; nil when none is
// usable.
func (in *Input) Keys() []Key { return inputKeys(in) }
