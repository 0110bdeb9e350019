package people

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/emaildata/emaildata/internal/refdata/phone"
)

// Phone status reference data: what a carrier or network source says of a
// number, beyond what the number itself tells (GET /pv). It is loaded like
// people, from a file whose header has a phone column and no email column
// (Import), and kept beside them: bucket phones in the embedded store,
// table people_phone_status in PostgreSQL.

// Phone status column names of an import file.
const (
	ColPhone          = "phone"
	ColPhoneCountry   = "country"
	ColPhoneStatus    = "status"
	ColPrepaid        = "prepaid"
	ColConnectedScore = "connected_score"
)

// PhoneColumns are the columns of a phone status file, in this order when
// written.
func PhoneColumns() []string {
	return []string{ColPhone, ColPhoneCountry, ColPhoneStatus, ColPrepaid, ColConnectedScore}
}

// Phone statuses a source may hold.
const (
	PhoneLive         = "live"
	PhoneDisconnected = "disconnected"
)

// PhoneStatus is the reference data of one number. Every field but Phone
// may be unknown: Status "", Prepaid and ConnectedScore nil.
type PhoneStatus struct {
	// Phone is the number in E.164 ("+14155552671").
	Phone string
	// Status is PhoneLive, PhoneDisconnected or "".
	Status string
	// Prepaid says whether the line is prepaid.
	Prepaid *bool
	// ConnectedScore (0-100, US numbers only) is how likely the number is
	// connected: above 70 likely, below 30 likely not.
	ConnectedScore *int
}

// PhoneStore keeps phone status reference data. Both built-in stores
// implement it.
type PhoneStore interface {
	// UpsertPhones inserts or replaces the entries (keyed by Phone, which
	// must be E.164; ParsePhoneStatus makes such entries). One call is
	// atomic; when a number occurs twice the last one wins.
	UpsertPhones(ctx context.Context, recs []PhoneStatus) error
	// LookupPhone returns the entry of an E.164 number, or nil.
	LookupPhone(ctx context.Context, e164 string) (*PhoneStatus, error)
}

var (
	_ PhoneStore = (*boltStore)(nil)
	_ PhoneStore = (*pgStore)(nil)
)

// PhoneStatusRow is one row of a phone status file, as written.
type PhoneStatusRow struct {
	Phone, Country, Status, Prepaid, ConnectedScore string
}

// ParsePhoneStatus checks a row and returns its entry: the number valid
// (national numbers in Country's form, US when empty), Status live or
// disconnected, Prepaid true or false (also yes/no, 1/0), ConnectedScore a
// whole number 0-100 and only for US numbers; each may be empty. The
// error is a *FieldError naming the column, never the value.
func ParsePhoneStatus(row PhoneStatusRow) (PhoneStatus, error) {
	region := ""
	if c := strings.TrimSpace(row.Country); c != "" {
		var ok bool
		if region, ok = phone.Region(c); !ok {
			return PhoneStatus{}, &FieldError{ColPhoneCountry, "not an ISO 3166 alpha-2 code with a calling code"}
		}
	}
	n, err := phone.Parse(row.Phone, region)
	if err != nil || !n.Valid {
		return PhoneStatus{}, &FieldError{ColPhone, "not a valid phone number"}
	}
	ps := PhoneStatus{Phone: n.E164}
	switch s := strings.ToLower(strings.TrimSpace(row.Status)); s {
	case "", PhoneLive, PhoneDisconnected:
		ps.Status = s
	default:
		return PhoneStatus{}, &FieldError{ColPhoneStatus, "not live or disconnected"}
	}
	switch strings.ToLower(strings.TrimSpace(row.Prepaid)) {
	case "":
	case "true", "yes", "1":
		ps.Prepaid = new(true)
	case "false", "no", "0":
		ps.Prepaid = new(false)
	default:
		return PhoneStatus{}, &FieldError{ColPrepaid, "not true or false"}
	}
	if v := strings.TrimSpace(row.ConnectedScore); v != "" {
		sc, err := strconv.Atoi(v)
		if err != nil || sc < 0 || sc > 100 || len(v) > 3 {
			return PhoneStatus{}, &FieldError{ColConnectedScore, "not a whole number from 0 to 100"}
		}
		if n.Region != "US" {
			return PhoneStatus{}, &FieldError{ColConnectedScore, "given for a number outside the US"}
		}
		ps.ConnectedScore = &sc
	}
	return ps, nil
}

// checkPhones validates entries given to UpsertPhones: E.164 numbers that
// are valid, known statuses, scores in range.
func checkPhones(recs []PhoneStatus) error {
	for i := range recs {
		r := &recs[i]
		n, err := phone.Parse(r.Phone, "")
		if err != nil || !n.Valid || n.E164 != r.Phone {
			return fmt.Errorf("people: phone %d: %w", i, &FieldError{ColPhone, "not a valid E.164 number"})
		}
		if r.Status != "" && r.Status != PhoneLive && r.Status != PhoneDisconnected {
			return fmt.Errorf("people: phone %d: %w", i, &FieldError{ColPhoneStatus, "not live or disconnected"})
		}
		if r.ConnectedScore != nil && (*r.ConnectedScore < 0 || *r.ConnectedScore > 100) {
			return fmt.Errorf("people: phone %d: %w", i, &FieldError{ColConnectedScore, "not from 0 to 100"})
		}
	}
	return nil
}

// Embedded value of bucket phones (key: the E.164 number), version 1:
//
//	byte  version (1)
//	byte  status: 0 unknown, 1 live, 2 disconnected
//	byte  prepaid: 0 unknown, 1 false, 2 true
//	byte  connected score: 0 unknown, else score + 1
var bucketPhones = []byte("phones")

const phoneCodecVersion = 1

var phoneStatusCodes = []string{"", PhoneLive, PhoneDisconnected}

func encodePhone(r *PhoneStatus) []byte {
	b := []byte{phoneCodecVersion, 0, 0, 0}
	for i, s := range phoneStatusCodes {
		if s == r.Status {
			b[1] = byte(i)
		}
	}
	if r.Prepaid != nil {
		b[2] = 1
		if *r.Prepaid {
			b[2] = 2
		}
	}
	if r.ConnectedScore != nil {
		b[3] = byte(*r.ConnectedScore + 1)
	}
	return b
}

func decodePhone(e164 string, v []byte) (*PhoneStatus, error) {
	if len(v) != 4 || v[0] != phoneCodecVersion || int(v[1]) >= len(phoneStatusCodes) || v[2] > 2 || v[3] > 101 {
		return nil, errCorrupt
	}
	r := &PhoneStatus{Phone: e164, Status: phoneStatusCodes[v[1]]}
	if v[2] != 0 {
		r.Prepaid = new(v[2] == 2)
	}
	if v[3] != 0 {
		r.ConnectedScore = new(int(v[3]) - 1)
	}
	return r, nil
}

func (s *boltStore) UpsertPhones(ctx context.Context, recs []PhoneStatus) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkPhones(recs); err != nil || len(recs) == 0 {
		return err
	}
	kvs := make([]kv, len(recs))
	for i := range recs {
		kvs[i] = kv{[]byte(recs[i].Phone), encodePhone(&recs[i])}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPhones)
		for _, e := range kvs { // in input order: the last of a number wins
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) LookupPhone(ctx context.Context, e164 string) (*PhoneStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *PhoneStatus
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPhones).Get([]byte(e164))
		if v == nil {
			return nil
		}
		var err error
		out, err = decodePhone(e164, v)
		return err
	})
	return out, err
}
