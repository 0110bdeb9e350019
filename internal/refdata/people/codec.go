package people

import (
	"encoding/binary"
	"errors"
)

// Embedded value format (the key holds the email). Version 3, written:
//
//	byte     version (3)
//	8 ×      uvarint length + bytes: first, middle, last, street, city, state, zip, household_id
//	byte     n, the number of demographic codes that follow
//	n bytes  codes in demoFields order: 0 = empty, else bucket index + 1
//	uvarint  interests bit set
//	byte     m, the number of rfm fields that follow
//	m ×      uvarint length + bytes, in rfmFields order
//	uvarint  k, the number of other addresses (AltEmails) that follow
//	k ×      uvarint length + bytes
//
// Version 2 (still read) ends after the rfm fields. Version 1 (still read) has the same text fields, then exactly 11
// demographic codes and the interests, and nothing after. Fields missing
// from a stored value (fewer codes or rfm fields than this program knows)
// decode as unknown; more than it knows are corrupt.
const (
	codecVersion   = 3
	codecV2        = 2
	codecV1        = 1
	codecV1DemoLen = 11
)

var errCorrupt = errors.New("people: corrupt stored record")

func appendRecord(b []byte, r *Record) []byte {
	b = append(b, codecVersion)
	for _, f := range textFields[1:] { // not the email
		s := *f.get(r)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, byte(len(demoFields)))
	for i := range demoFields {
		f := &demoFields[i]
		v := *f.get(r)
		var code byte
		if v != "" {
			code = f.canon[v] + 1
		}
		b = append(b, code)
	}
	b = binary.AppendUvarint(b, uint64(r.Interests))
	b = append(b, byte(len(rfmFields)))
	for _, f := range rfmFields {
		s := *f.get(r)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.AltEmails)))
	for _, e := range r.AltEmails {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// decodeRecord decodes v, stored under email, into r. The text fields
// share one string copied from v.
func decodeRecord(email string, v []byte, r *Record) error {
	if len(v) == 0 || v[0] != codecVersion && v[0] != codecV2 && v[0] != codecV1 {
		return errCorrupt
	}
	version := v[0]
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
	nDemo := codecV1DemoLen
	if version != codecV1 {
		if len(p) == 0 {
			return errCorrupt
		}
		nDemo, p = int(p[0]), p[1:]
	}
	if nDemo > len(demoFields) || len(p) < nDemo {
		return errCorrupt
	}
	for i := range nDemo {
		f := &demoFields[i]
		if c := p[i]; c != 0 {
			if int(c) > len(f.values) {
				return errCorrupt
			}
			*f.get(r) = f.values[c-1]
		}
	}
	p = p[nDemo:]
	in, k := binary.Uvarint(p)
	if k <= 0 {
		return errCorrupt
	}
	r.Interests = Interests(in)
	p = p[k:]
	if version == codecV1 {
		if len(p) != 0 {
			return errCorrupt
		}
		return nil
	}
	p, err := decodeRFM(p, r)
	switch {
	case err != nil:
		return err
	case version == codecV2:
		if len(p) != 0 {
			return errCorrupt
		}
		return nil
	}
	return decodeAltEmails(p, r)
}

// decodeAltEmails decodes the other addresses of a version 3 value, which
// must end it.
func decodeAltEmails(p []byte, r *Record) error {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > MaxAltEmails {
		return errCorrupt
	}
	p = p[k:]
	if n > 0 {
		r.AltEmails = make([]string, n)
	}
	for i := range r.AltEmails {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return errCorrupt
		}
		r.AltEmails[i] = string(p[k : k+int(l)])
		p = p[k+int(l):]
	}
	if len(p) != 0 {
		return errCorrupt
	}
	return nil
}

// decodeRFM decodes the rfm part of a version 2 or 3 value and returns
// what follows it.
func decodeRFM(p []byte, r *Record) ([]byte, error) {
	if len(p) == 0 || int(p[0]) > len(rfmFields) {
		return nil, errCorrupt
	}
	n := int(p[0])
	p = p[1:]
	for i := range n {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return nil, errCorrupt
		}
		if l > 0 {
			*rfmFields[i].get(r) = string(p[k : k+int(l)])
		}
		p = p[k+int(l):]
	}
	return p, nil
}
