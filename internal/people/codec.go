package people

import (
	"encoding/binary"
	"errors"
)

// Embedded value format, version 1 (the key holds the email):
//
//	byte     version (1)
//	8 ×      uvarint length + bytes: first, middle, last, street, city, state, zip, household_id
//	11 bytes demographic codes in demoFields order: 0 = empty, else bucket index + 1
//	uvarint  interests bit set
const codecVersion = 1

var errCorrupt = errors.New("people: corrupt stored record")

func appendRecord(b []byte, r *Record) []byte {
	b = append(b, codecVersion)
	for _, f := range textFields[1:] { // not the email
		s := *f.get(r)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for i := range demoFields {
		f := &demoFields[i]
		v := *f.get(r)
		var code byte
		if v != "" {
			code = f.canon[v] + 1
		}
		b = append(b, code)
	}
	return binary.AppendUvarint(b, uint64(r.Interests))
}

// decodeRecord decodes v, stored under email, into r. The text fields
// share one string copied from v.
func decodeRecord(email string, v []byte, r *Record) error {
	if len(v) == 0 || v[0] != codecVersion {
		return errCorrupt
	}
	*r = Record{Email: email}
	// Find the end of the text fields, then copy them in one string.
	p := v[1:]
	var bounds [2 * 8]int
	off := 0
	for i := range textFields[1:] {
		n, k := binary.Uvarint(p[off:])
		if k <= 0 || uint64(len(p)-off-k) < n {
			return errCorrupt
		}
		bounds[2*i], bounds[2*i+1] = off+k, off+k+int(n)
		off += k + int(n)
	}
	text := string(p[:off])
	for i, f := range textFields[1:] {
		*f.get(r) = text[bounds[2*i]:bounds[2*i+1]]
	}
	p = p[off:]
	if len(p) < len(demoFields) {
		return errCorrupt
	}
	for i := range demoFields {
		f := &demoFields[i]
		if c := p[i]; c != 0 {
			if int(c) > len(f.values) {
				return errCorrupt
			}
			*f.get(r) = f.values[c-1]
		}
	}
	p = p[len(demoFields):]
	in, k := binary.Uvarint(p)
	if k <= 0 || k != len(p) {
		return errCorrupt
	}
	r.Interests = Interests(in)
	return nil
}
