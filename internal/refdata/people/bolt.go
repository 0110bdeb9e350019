package people

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Embedded (bbolt) layout, one file, nine buckets (and phones, phones.go):
//
//	people     normalised email                 -> record (codec.go)
//	md5        16-byte MD5 of the email          -> email
//	sha1       20-byte SHA-1 of the email        -> email
//	household  household id, 0x00, email         -> empty
//	postal     NormalizeName(last), 0x00, NormalizeZip(zip), 0x00, email -> empty
//	locality   NormalizeName(last), 0x00, state, 0x00, NormalizeName(city), 0x00, email -> empty
//	alt        another address of a person       -> the person's email
//	altmd5     16-byte MD5 of that address       -> the person's email
//	altsha1    20-byte SHA-1 of that address     -> the person's email
//
// All are written in the same transaction. An address in alt that is also
// a person's email is found as that person (people is read first); one
// that two people list is found as the one written last. The postal
// bucket holds only people with a last name that has letters and a valid
// zip, the locality bucket those with a last name, a state and a city that
// have letters. Each index bucket is built from the people bucket when a file
// made before it is opened.
var (
	bucketPeople    = []byte("people")
	bucketMD5       = []byte("md5")
	bucketSHA1      = []byte("sha1")
	bucketHousehold = []byte("household")
	bucketPostal    = []byte("postal")
	bucketLocality  = []byte("locality")
	bucketAlt       = []byte("alt")
	bucketAltMD5    = []byte("altmd5")
	bucketAltSHA1   = []byte("altsha1")
	// boltBuckets are created when missing. A file made before the alt
	// buckets existed has no person with other addresses: empty is right.
	boltBuckets = [][]byte{bucketPeople, bucketMD5, bucketSHA1, bucketHousehold, bucketAlt, bucketAltMD5, bucketAltSHA1, bucketPhones}
)

// boltIndexes are the buckets derived from the people bucket alone, built
// on open when missing: each maps an encoded record to its key (nil for
// none).
var boltIndexes = []struct {
	name []byte
	key  func(email string, v []byte) []byte
}{
	{bucketPostal, func(email string, v []byte) []byte {
		return postalKey(storedText(v, fieldLast), storedText(v, fieldZip), email)
	}},
	{bucketLocality, func(email string, v []byte) []byte {
		return localityKey(storedText(v, fieldLast), storedText(v, fieldState), storedText(v, fieldCity), email)
	}},
}

// defaultBoltPageSize is the page size of new bolt files. 16 KiB pages
// made a 1,000,000-row import about 40 % faster than 4 KiB ones, at equal
// lookup latency, for a 30 % larger file (docs/benchmarks.md).
const defaultBoltPageSize = 16 << 10

type boltStore struct {
	db *bolt.DB
}

func openBolt(u *url.URL) (Store, error) {
	path, err := filePath(u)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	opts := &bolt.Options{
		Timeout:        5 * time.Second,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
		PageSize:       defaultBoltPageSize,
	}
	if v := q.Get("pagesize"); v != "" {
		if opts.PageSize, err = strconv.Atoi(v); err != nil || opts.PageSize < 1024 || opts.PageSize&(opts.PageSize-1) != 0 {
			return nil, fmt.Errorf("people: bolt pagesize must be a power of two of at least 1024")
		}
	}
	if v := q.Get("timeout"); v != "" {
		if opts.Timeout, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("people: bolt timeout: %w", err)
		}
	}
	if v := q.Get("nosync"); v != "" {
		if opts.NoSync, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("people: bolt nosync: %w", err)
		}
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("people: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		return nil, fmt.Errorf("people: open bolt store: %w", err)
	}
	db.NoSync = opts.NoSync
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range boltBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		for _, ix := range boltIndexes {
			if tx.Bucket(ix.name) != nil {
				continue
			}
			b, err := tx.CreateBucket(ix.name)
			if err != nil {
				return err
			}
			err = tx.Bucket(bucketPeople).ForEach(func(email, v []byte) error {
				if k := ix.key(string(email), v); k != nil {
					return b.Put(k, []byte{})
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("people: init bolt store: %w", err)
	}
	return &boltStore{db: db}, nil
}

func (s *boltStore) Close() error { return s.db.Close() }

func householdKey(id, email string) []byte {
	k := make([]byte, 0, len(id)+1+len(email))
	k = append(k, id...)
	k = append(k, 0)
	return append(k, email...)
}

// postalKey returns the postal bucket key of a person, or nil when the
// last name has no letters or the zip is not valid.
func postalKey(last, zip, email string) []byte {
	last, zip = NormalizeName(last), NormalizeZip(zip)
	if last == "" || zip == "" {
		return nil
	}
	return postalPrefix(last, zip, email)
}

// postalPrefix joins normalised parts; with email "" it is the prefix of
// all the people of last and zip.
func postalPrefix(last, zip, email string) []byte {
	k := make([]byte, 0, len(last)+len(zip)+2+len(email))
	k = append(k, last...)
	k = append(k, 0)
	k = append(k, zip...)
	k = append(k, 0)
	return append(k, email...)
}

// localityKey returns the locality bucket key of a person, or nil when
// the last name or city has no letters or the state is not two letters.
func localityKey(last, state, city, email string) []byte {
	last, state, city = NormalizeName(last), normState(state), NormalizeName(city)
	if last == "" || state == "" || city == "" {
		return nil
	}
	return localityPrefix(last, state, city, email)
}

func localityPrefix(last, state, city, email string) []byte {
	k := make([]byte, 0, len(last)+len(state)+len(city)+3+len(email))
	k = append(k, last...)
	k = append(k, 0)
	k = append(k, state...)
	k = append(k, 0)
	k = append(k, city...)
	k = append(k, 0)
	return append(k, email...)
}

// Indexes of text fields in the stored record (textFields without the
// email).
const (
	fieldLast  = 2
	fieldCity  = 4
	fieldState = 5
	fieldZip   = 6
)

// storedText returns text field i (0 = first name, see codec.go) of an
// encoded record without decoding the rest, or "" when it is corrupt.
func storedText(v []byte, i int) string {
	if len(v) == 0 {
		return ""
	}
	p := v[1:]
	for j := 0; j < len(textFields)-1; j++ {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			return ""
		}
		if j == i {
			return string(p[k : k+int(n)])
		}
		p = p[k+int(n):]
	}
	return ""
}

// storedHousehold returns the household id of an encoded record without
// decoding the rest.
func storedHousehold(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	p := v[1:]
	for i := 0; i < len(textFields)-1; i++ {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			return ""
		}
		if i == len(textFields)-2 {
			return string(p[k : k+int(n)])
		}
		p = p[k+int(n):]
	}
	return ""
}

type kv struct{ k, v []byte }

func putSorted(b *bolt.Bucket, kvs []kv) error {
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for _, e := range kvs {
		if err := b.Put(e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}

func (s *boltStore) Upsert(ctx context.Context, recs []Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	recs, err := prepare(recs)
	if err != nil || len(recs) == 0 {
		return err
	}
	claims := altClaims(recs) // before sorting: the last claim in input order wins
	slices.SortFunc(recs, func(a, b Record) int { return cmpString(a.Email, b.Email) })
	e := encodeBatch(recs, claims)
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := e.dropStale(tx, recs); err != nil {
			return err
		}
		return e.put(tx)
	})
}

// boltBatch is a sorted batch encoded for the buckets; postalOf and
// localityOf are each record's new index keys (nil: none).
type boltBatch struct {
	people, md5s, sha1s, hh, postal, locality []kv
	alt, altMD5, altSHA1                      []kv
	postalOf, localityOf                      [][]byte
}

// encodeBatch encodes outside the transaction. bbolt needs keys and values
// to stay valid until commit: they live in one arena per call.
func encodeBatch(recs []Record, claims []altClaim) *boltBatch {
	n := len(recs)
	size := 0
	for i := range recs {
		size += 2*len(recs[i].Email) + len(recs[i].HouseholdID) + 1 + 200 + 36
	}
	arena := make([]byte, 0, size)
	e := &boltBatch{
		people: make([]kv, n), md5s: make([]kv, n), sha1s: make([]kv, n),
		hh: make([]kv, 0, n), postal: make([]kv, 0, n), locality: make([]kv, 0, n),
		postalOf: make([][]byte, n), localityOf: make([][]byte, n),
	}
	take := func(from int) []byte { return arena[from:len(arena):len(arena)] }
	for i := range recs {
		r := &recs[i]
		start := len(arena)
		arena = append(arena, r.Email...)
		email := take(start)
		start = len(arena)
		arena = appendRecord(arena, r)
		e.people[i] = kv{email, take(start)}
		m, h := md5.Sum(email), sha1.Sum(email)
		e.md5s[i] = kv{m[:], email}
		e.sha1s[i] = kv{h[:], email}
		if r.HouseholdID != "" {
			e.hh = append(e.hh, kv{householdKey(r.HouseholdID, r.Email), []byte{}})
		}
		if k := postalKey(r.Last, r.Zip, r.Email); k != nil {
			e.postalOf[i] = k
			e.postal = append(e.postal, kv{k, []byte{}})
		}
		if k := localityKey(r.Last, r.State, r.City, r.Email); k != nil {
			e.localityOf[i] = k
			e.locality = append(e.locality, kv{k, []byte{}})
		}
	}
	for _, c := range claims {
		owner := []byte(c.owner)
		m, h := md5.Sum([]byte(c.email)), sha1.Sum([]byte(c.email))
		e.alt = append(e.alt, kv{[]byte(c.email), owner})
		e.altMD5 = append(e.altMD5, kv{m[:], owner})
		e.altSHA1 = append(e.altSHA1, kv{h[:], owner})
	}
	return e
}

// altClaim is one other address of a person: email belongs to owner.
type altClaim struct{ email, owner string }

// altClaims lists the other addresses of recs, each once: an address two
// records list goes to the later one.
func altClaims(recs []Record) []altClaim {
	var out []altClaim
	at := map[string]int{}
	for i := range recs {
		for _, a := range recs[i].AltEmails {
			if j, ok := at[a]; ok {
				out[j].owner = recs[i].Email
				continue
			}
			at[a] = len(out)
			out = append(out, altClaim{a, recs[i].Email})
		}
	}
	return out
}

// dropAlts deletes the alt index entries of addresses that point at
// owner, except those in keep.
func dropAlts(tx *bolt.Tx, owner string, alts, keep []string) error {
	ab := tx.Bucket(bucketAlt)
	for _, a := range alts {
		if slices.Contains(keep, a) || string(ab.Get([]byte(a))) != owner {
			continue
		}
		m, h := md5.Sum([]byte(a)), sha1.Sum([]byte(a))
		if err := ab.Delete([]byte(a)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAltMD5).Delete(m[:]); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAltSHA1).Delete(h[:]); err != nil {
			return err
		}
	}
	return nil
}

// storedAlts returns the other addresses of an encoded record (nil for a
// value older than version 3 or a corrupt one).
func storedAlts(email string, v []byte) []string {
	if len(v) == 0 || v[0] != codecVersion {
		return nil
	}
	var r Record
	if decodeRecord(email, v, &r) != nil {
		return nil
	}
	return r.AltEmails
}

// dropStale deletes the household, postal and locality index entries of
// stored records that the batch changes.
func (e *boltBatch) dropStale(tx *bolt.Tx, recs []Record) error {
	pb := tx.Bucket(bucketPeople)
	hb := tx.Bucket(bucketHousehold)
	xb := tx.Bucket(bucketPostal)
	lb := tx.Bucket(bucketLocality)
	for i := range recs {
		old := pb.Get(e.people[i].k)
		if old == nil {
			continue
		}
		if oh := storedHousehold(old); oh != "" && oh != recs[i].HouseholdID {
			if err := hb.Delete(householdKey(oh, recs[i].Email)); err != nil {
				return err
			}
		}
		if opk := postalKey(storedText(old, fieldLast), storedText(old, fieldZip), recs[i].Email); opk != nil && !bytes.Equal(opk, e.postalOf[i]) {
			if err := xb.Delete(opk); err != nil {
				return err
			}
		}
		if olk := localityKey(storedText(old, fieldLast), storedText(old, fieldState), storedText(old, fieldCity), recs[i].Email); olk != nil && !bytes.Equal(olk, e.localityOf[i]) {
			if err := lb.Delete(olk); err != nil {
				return err
			}
		}
		if err := dropAlts(tx, recs[i].Email, storedAlts(recs[i].Email, old), recs[i].AltEmails); err != nil {
			return err
		}
	}
	return nil
}

// put writes the batch to every bucket, in key order.
func (e *boltBatch) put(tx *bolt.Tx) error {
	for _, b := range []struct {
		name []byte
		kvs  []kv
	}{
		{bucketPeople, e.people}, {bucketMD5, e.md5s}, {bucketSHA1, e.sha1s},
		{bucketHousehold, e.hh}, {bucketPostal, e.postal}, {bucketLocality, e.locality},
		{bucketAlt, e.alt}, {bucketAltMD5, e.altMD5}, {bucketAltSHA1, e.altSHA1},
	} {
		if err := putSorted(tx.Bucket(b.name), b.kvs); err != nil {
			return err
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *boltStore) Delete(ctx context.Context, emails []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	emails = normEmails(emails)
	if len(emails) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		pb := tx.Bucket(bucketPeople)
		for _, e := range emails {
			old := pb.Get([]byte(e))
			if old == nil {
				continue
			}
			if oh := storedHousehold(old); oh != "" {
				if err := tx.Bucket(bucketHousehold).Delete(householdKey(oh, e)); err != nil {
					return err
				}
			}
			if k := postalKey(storedText(old, fieldLast), storedText(old, fieldZip), e); k != nil {
				if err := tx.Bucket(bucketPostal).Delete(k); err != nil {
					return err
				}
			}
			if k := localityKey(storedText(old, fieldLast), storedText(old, fieldState), storedText(old, fieldCity), e); k != nil {
				if err := tx.Bucket(bucketLocality).Delete(k); err != nil {
					return err
				}
			}
			if err := dropAlts(tx, e, storedAlts(e, old), nil); err != nil {
				return err
			}
			m, h := md5.Sum([]byte(e)), sha1.Sum([]byte(e))
			if err := tx.Bucket(bucketMD5).Delete(m[:]); err != nil {
				return err
			}
			if err := tx.Bucket(bucketSHA1).Delete(h[:]); err != nil {
				return err
			}
			if err := pb.Delete([]byte(e)); err != nil {
				return err
			}
		}
		return nil
	})
}

// boltView holds the buckets of one read transaction, each opened when
// first needed (opening one is a lookup and an allocation; a plain email
// lookup needs only the people bucket).
type boltView struct {
	tx                    *bolt.Tx
	people, md5, sha1, hh *bolt.Bucket
	alt, altMD5, altSHA1  *bolt.Bucket
}

func newBoltView(tx *bolt.Tx) *boltView {
	return &boltView{tx: tx, people: tx.Bucket(bucketPeople)}
}

func (v *boltView) bucket(b **bolt.Bucket, name []byte) *bolt.Bucket {
	if *b == nil {
		*b = v.tx.Bucket(name)
	}
	return *b
}

// lookup returns the email and encoded record of k, or nils: the person
// whose email k is, else the person who has k as another address.
func (v *boltView) lookup(k Key) (email, rec []byte) {
	raw, ok := k.raw()
	if !ok {
		return nil, nil
	}
	var alt []byte
	switch k.Kind {
	case KeyEmail:
		email = raw
		if rec = v.people.Get(email); rec != nil {
			return email, rec
		}
		alt = v.bucket(&v.alt, bucketAlt).Get(raw)
	case KeyMD5:
		email = v.bucket(&v.md5, bucketMD5).Get(raw)
		if email == nil {
			alt = v.bucket(&v.altMD5, bucketAltMD5).Get(raw)
		}
	case KeySHA1:
		email = v.bucket(&v.sha1, bucketSHA1).Get(raw)
		if email == nil {
			alt = v.bucket(&v.altSHA1, bucketAltSHA1).Get(raw)
		}
	}
	if email == nil || k.Kind == KeyEmail {
		email = alt
	}
	if email == nil {
		return nil, nil
	}
	return email, v.people.Get(email)
}

func (v *boltView) household(id string, out []Record) ([]Record, error) {
	if id == "" {
		return out, nil
	}
	prefix := householdKey(id, "")
	c := v.bucket(&v.hh, bucketHousehold).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		email := k[len(prefix):]
		val := v.people.Get(email)
		if val == nil {
			continue
		}
		out = append(out, Record{})
		if err := decodeRecord(string(email), val, &out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *boltStore) Get(ctx context.Context, key Key) (*Record, error) {
	recs, err := s.LookupBatch(ctx, []Key{key})
	if err != nil {
		return nil, err
	}
	if recs[0] == nil {
		return nil, ErrNotFound
	}
	return recs[0], nil
}

func (s *boltStore) LookupBatch(ctx context.Context, keys []Key) ([]*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*Record, len(keys))
	err := parallel(len(keys), 1024, func(lo, hi int) error {
		slab := make([]Record, 0, hi-lo)
		return s.db.View(func(tx *bolt.Tx) error {
			v := newBoltView(tx)
			for i := lo; i < hi; i++ {
				email, val := v.lookup(keys[i])
				if val == nil {
					continue
				}
				slab = append(slab, Record{})
				r := &slab[len(slab)-1]
				if err := decodeRecord(string(email), val, r); err != nil {
					return err
				}
				out[i] = r
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *boltStore) Household(ctx context.Context, id string) ([]Record, error) {
	r, err := s.HouseholdBatch(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	return r[0], nil
}

func (s *boltStore) HouseholdBatch(ctx context.Context, ids []string) ([][]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]Record, len(ids))
	err := parallel(len(ids), 128, func(lo, hi int) error {
		return s.db.View(func(tx *bolt.Tx) error {
			v := newBoltView(tx)
			for i := lo; i < hi; i++ {
				var err error
				if out[i], err = v.household(ids[i], nil); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FindByNamePostal implements NamePostalFinder with a prefix scan of the
// postal bucket (or, for a key without a zip, the locality bucket) per key.
func (s *boltStore) FindByNamePostal(ctx context.Context, keys []NamePostalKey) ([][]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]Record, len(keys))
	err := parallel(len(keys), 128, func(lo, hi int) error {
		return s.db.View(func(tx *bolt.Tx) error {
			pb := tx.Bucket(bucketPeople)
			pc, lc := tx.Bucket(bucketPostal).Cursor(), tx.Bucket(bucketLocality).Cursor()
			for i := lo; i < hi; i++ {
				nk, ok := keys[i].norm()
				if !ok {
					continue
				}
				c, prefix := pc, postalPrefix(nk.last, nk.zip, "")
				if nk.zip == "" {
					c, prefix = lc, localityPrefix(nk.last, nk.state, nk.city, "")
				}
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
					email := k[len(prefix):]
					val := pb.Get(email)
					if val == nil {
						continue
					}
					out[i] = append(out[i], Record{})
					if err := decodeRecord(string(email), val, &out[i][len(out[i])-1]); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
