package people

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// backend opens a fresh, empty store for a test.
type backend struct {
	name string
	open func(t testing.TB) Store
	url  func(t testing.TB) string // the URL open uses (a new one per call)
}

func backends() []backend {
	return []backend{
		{name: "bolt", url: boltURL},
		{name: "postgres", url: pgTestURL},
	}
}

func boltURL(t testing.TB) string {
	return "bolt://" + filepath.Join(t.TempDir(), "people.db")
}

func openURL(t testing.TB, u string) Store {
	t.Helper()
	s, err := Open(context.Background(), u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (b backend) openStore(t testing.TB) Store { return openURL(t, b.url(t)) }

// databaseURL is DATABASE_URL or the local default.
func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// requirePostgres connects to the test database, or skips the test when it
// is unreachable; with CI=true it fails instead.
func requirePostgres(t testing.TB) *pgx.Conn {
	t.Helper()
	// Generous: a refused connection fails at once, and a server slowed by a
	// busy machine (make test runs packages side by side) still answers.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, databaseURL())
	if err == nil {
		err = c.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable (CI=true, so not skipping): %v", err)
		}
		t.Skipf("PostgreSQL unreachable, skipping (set DATABASE_URL; with CI=true this fails): %v", err)
	}
	return c
}

// pgTestURL makes a unique schema for the test, dropped when it ends, and
// returns a store URL for it.
func pgTestURL(t testing.TB) string {
	t.Helper()
	c := requirePostgres(t)
	c.Close(context.Background())
	var b [6]byte
	rand.Read(b[:])
	schema := fmt.Sprintf("people_test_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, databaseURL())
		if err != nil {
			t.Errorf("drop test schema: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	return withSchema(databaseURL(), schema)
}

func withSchema(dbURL, schema string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func person(email, first, last, hh string) Record {
	return Record{
		Email: email, First: first, Last: last, HouseholdID: hh,
		Street: "12 Oak St", City: "Denver", State: "CO", Zip: "80203",
		Age: "35-44", Gender: "Female", HouseholdIncome: "75k-100k", NetWorth: "100k-250k",
		HomeMarketValue: "300k-350k", HomeOwnerStatus: "Own", LengthOfResidence: "7 Years",
		MaritalStatus: "Married", PresenceOfChildren: "Yes", Education: "Completed College",
		Occupation: "Professional", Interests: mustInterests("travel", "cooking"),
		LifeStageSegment: "Busy Families", LifeStageGroup: "Established Families",
		FinancialSegment: "Comfortable Savers", FinancialGroup: "Comfortable",
		RFMOfflineAvgDays: "45", RFMOnlineAvgDays: "21", RFMAvgDollars: "57.40", RFMLastOrder: "2025-11-03",
	}
}

func mustInterests(names ...string) Interests {
	s, err := InterestsOf(names...)
	if err != nil {
		panic(err)
	}
	return s
}

func emails(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Email)
	}
	return out
}

func TestStore(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("UpsertGet", func(t *testing.T) { testUpsertGet(t, b.openStore(t)) })
			t.Run("Idempotent", func(t *testing.T) { testIdempotent(t, b.openStore(t)) })
			t.Run("Households", func(t *testing.T) { testHouseholds(t, b.openStore(t)) })
			t.Run("LookupBatch", func(t *testing.T) { testLookupBatch(t, b.openStore(t)) })
			t.Run("Invalid", func(t *testing.T) { testInvalid(t, b.openStore(t)) })
			t.Run("Delete", func(t *testing.T) { testDelete(t, b.openStore(t)) })
			t.Run("Large", func(t *testing.T) { testLarge(t, b.openStore(t)) })
			t.Run("Reopen", func(t *testing.T) { testReopen(t, b.url(t)) })
		})
	}
}

func testUpsertGet(t *testing.T, s Store) {
	ctx := context.Background()
	in := person("  Ann.Lee@Example.COM ", "Ann", "Lee", "HH1")
	in.Gender = "female" // canonicalised
	in.Middle = "Q"
	if err := s.Upsert(ctx, []Record{in}); err != nil {
		t.Fatal(err)
	}
	want := person("ann.lee@example.com", "Ann", "Lee", "HH1")
	want.Middle = "Q"
	for _, tc := range []struct {
		name string
		key  Key
	}{
		{"email", EmailKey("ann.lee@example.com")},
		{"email not normalised", EmailKey(" ANN.LEE@example.com")},
		{"hand-built email key", Key{KeyEmail, "Ann.Lee@Example.com "}},
		{"md5", MD5Key(EmailMD5("ann.lee@example.com"))},
		{"md5 upper-case", MD5Key(" " + toUpper(EmailMD5("ann.lee@example.com")))},
		{"sha1", SHA1Key(EmailSHA1("ann.lee@example.com"))},
	} {
		got, err := s.Get(ctx, tc.key)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, *got, want)
		}
	}
	for _, tc := range []struct {
		name string
		key  Key
	}{
		{"unknown email", EmailKey("nobody@example.com")},
		{"md5 of other", MD5Key(EmailMD5("nobody@example.com"))},
		{"sha1 of other", SHA1Key(EmailSHA1("nobody@example.com"))},
		{"md5 too short", MD5Key("abc")},
		{"md5 not hex", MD5Key("zz" + EmailMD5("ann.lee@example.com")[2:])},
		{"sha1 given md5", SHA1Key(EmailMD5("ann.lee@example.com"))},
		{"empty", EmailKey("")},
		{"no kind", Key{Value: "ann.lee@example.com"}},
	} {
		if _, err := s.Get(ctx, tc.key); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", tc.name, err)
		}
	}
}

func toUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func testIdempotent(t *testing.T, s Store) {
	ctx := context.Background()
	recs := []Record{person("a@example.com", "Ann", "Lee", "H1"), person("b@example.com", "Bob", "Lee", "H1")}
	for i := 0; i < 3; i++ {
		if err := s.Upsert(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	hh, err := s.Household(ctx, "H1")
	if err != nil {
		t.Fatal(err)
	}
	if got := emails(hh); !reflect.DeepEqual(got, []string{"a@example.com", "b@example.com"}) {
		t.Fatalf("household after repeated upserts = %v", got)
	}
	// The last of duplicates in one call wins.
	c1, c2 := person("c@example.com", "Cy", "Old", "H2"), person("C@example.com", "Cy", "New", "H2")
	if err := s.Upsert(ctx, []Record{c1, c2}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, EmailKey("c@example.com"))
	if err != nil || got.Last != "New" {
		t.Fatalf("duplicate in one call: got %+v, %v", got, err)
	}
	// A replacement replaces the whole entry.
	c3 := Record{Email: "c@example.com", First: "Cy"}
	if err := s.Upsert(ctx, []Record{c3}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, EmailKey("c@example.com")); !reflect.DeepEqual(*got, c3) {
		t.Fatalf("replacement: got %+v", *got)
	}
	if hh, _ := s.Household(ctx, "H2"); len(hh) != 0 {
		t.Fatalf("household H2 still lists %v", emails(hh))
	}
}

func testHouseholds(t *testing.T, s Store) {
	ctx := context.Background()
	err := s.Upsert(ctx, []Record{
		person("z@example.com", "Zoe", "Lee", "H1"),
		person("a@example.com", "Ann", "Lee", "H1"),
		person("b@example.com", "Bob", "Kim", "H2"),
		person("n@example.com", "Ned", "Kim", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Move a to H2.
	if err := s.Upsert(ctx, []Record{person("a@example.com", "Ann", "Lee", "H2")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.HouseholdBatch(ctx, []string{"H1", "H2", "", "H9", "H2"})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"z@example.com"}, {"a@example.com", "b@example.com"}, nil, nil, {"a@example.com", "b@example.com"}}
	for i := range want {
		if g := emails(got[i]); !reflect.DeepEqual(g, want[i]) {
			t.Errorf("household %d = %v, want %v", i, g, want[i])
		}
	}
	if got[1][0].HouseholdID != "H2" || got[1][0].First != "Ann" {
		t.Errorf("household member record: %+v", got[1][0])
	}
	one, err := s.Household(ctx, "H1")
	if err != nil || len(one) != 1 || one[0].Email != "z@example.com" {
		t.Errorf("Household(H1) = %v, %v", emails(one), err)
	}
}

func testLookupBatch(t *testing.T, s Store) {
	ctx := context.Background()
	var recs []Record
	for i := range 50 {
		recs = append(recs, person(fmt.Sprintf("p%02d@example.org", i), "P", fmt.Sprintf("N%d", i), fmt.Sprintf("H%d", i/3)))
	}
	if err := s.Upsert(ctx, recs); err != nil {
		t.Fatal(err)
	}
	keys := []Key{
		EmailKey("p01@example.org"),
		MD5Key(EmailMD5("p02@example.org")),
		SHA1Key(EmailSHA1("p03@example.org")),
		EmailKey("missing@example.org"),
		MD5Key("not-a-digest"),
		EmailKey("P01@EXAMPLE.org"), // duplicate of the first
		SHA1Key(EmailSHA1("p01@example.org")),
		{},
		MD5Key(EmailMD5("missing@example.org")),
	}
	want := []string{"p01@example.org", "p02@example.org", "p03@example.org", "", "", "p01@example.org", "p01@example.org", "", ""}
	got, err := s.LookupBatch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d results for %d keys", len(got), len(keys))
	}
	for i, r := range got {
		e := ""
		if r != nil {
			e = r.Email
		}
		if e != want[i] {
			t.Errorf("key %d (%v): got %q, want %q", i, keys[i].Kind, e, want[i])
		}
	}
	if got[0] == got[5] {
		t.Error("duplicate keys share one *Record")
	}
	if got, err := s.LookupBatch(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("empty batch: %v, %v", got, err)
	}
}

func testInvalid(t *testing.T, s Store) {
	ctx := context.Background()
	good := person("ok@example.com", "Ok", "Fine", "H1")
	for _, tc := range []struct {
		name  string
		mod   func(*Record)
		field string
	}{
		{"bad email", func(r *Record) { r.Email = "not an email" }, ColEmail},
		{"bad age", func(r *Record) { r.Age = "30" }, ColAge},
		{"bad income", func(r *Record) { r.HouseholdIncome = "lots" }, ColHouseholdIncome},
		{"bad state", func(r *Record) { r.State = "Colorado" }, ColState},
		{"bad zip", func(r *Record) { r.Zip = "8020" }, ColZip},
		{"control char", func(r *Record) { r.First = "A\x00B" }, ColFirst},
		{"unknown interest", func(r *Record) { r.Interests = 1 << 62 }, ColInterests},
	} {
		bad := good
		bad.Email = "bad@example.com"
		tc.mod(&bad)
		err := s.Upsert(ctx, []Record{good, bad})
		var re *RecordError
		if !errors.As(err, &re) || re.Index != 1 || re.Err.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
		if _, err := s.Get(ctx, EmailKey("ok@example.com")); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: the valid record of a failed call was written", tc.name)
		}
	}
}

func testDelete(t *testing.T, s Store) {
	ctx := context.Background()
	if err := s.Upsert(ctx, []Record{person("a@example.com", "A", "L", "H1"), person("b@example.com", "B", "L", "H1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, []string{" A@example.com", "unknown@example.com", ""}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LookupBatch(ctx, []Key{EmailKey("a@example.com"), MD5Key(EmailMD5("a@example.com")), SHA1Key(EmailSHA1("a@example.com")), EmailKey("b@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != nil || got[1] != nil || got[2] != nil || got[3] == nil {
		t.Errorf("after delete: %v", got)
	}
	if hh, _ := s.Household(ctx, "H1"); !reflect.DeepEqual(emails(hh), []string{"b@example.com"}) {
		t.Errorf("household after delete: %v", emails(hh))
	}
}

// testLarge goes through the bulk paths (COPY for PostgreSQL) with
// generated people and checks every one by each key.
func testLarge(t *testing.T, s Store) {
	ctx := context.Background()
	recs := GenerateSlice(7, 3000)
	if err := s.Upsert(ctx, recs[:2000]); err != nil {
		t.Fatal(err)
	}
	// Overlapping second call: 1000 replaced (one moved household), 1000 new.
	recs[1500].HouseholdID = "HHmoved"
	if err := s.Upsert(ctx, recs[1000:]); err != nil {
		t.Fatal(err)
	}
	keys := make([]Key, 0, 3*len(recs))
	for _, r := range recs {
		keys = append(keys, EmailKey(r.Email), MD5Key(EmailMD5(r.Email)), SHA1Key(EmailSHA1(r.Email)))
	}
	got, err := s.LookupBatch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		want := recs[i/3]
		if r == nil || !reflect.DeepEqual(*r, want) {
			t.Fatalf("key %d: got %+v\nwant %+v", i, r, want)
		}
	}
	hh, err := s.HouseholdBatch(ctx, []string{recs[1500].HouseholdID, GenerateSlice(7, 1501)[1500].HouseholdID})
	if err != nil {
		t.Fatal(err)
	}
	if len(hh[0]) != 1 || hh[0][0].Email != recs[1500].Email {
		t.Errorf("moved household: %v", emails(hh[0]))
	}
	for _, m := range hh[1] {
		if m.Email == recs[1500].Email {
			t.Errorf("old household still lists the moved person")
		}
	}
	// Every household at once (the parallel path of the embedded store).
	want := map[string][]string{}
	var ids []string
	for _, r := range recs {
		if want[r.HouseholdID] == nil {
			ids = append(ids, r.HouseholdID)
		}
		want[r.HouseholdID] = append(want[r.HouseholdID], r.Email)
	}
	all, err := s.HouseholdBatch(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		w := slices.Sorted(slices.Values(want[id]))
		if g := emails(all[i]); !reflect.DeepEqual(g, w) {
			t.Fatalf("household %s: %v, want %v", id, g, w)
		}
	}
}

func testReopen(t *testing.T, u string) {
	ctx := context.Background()
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, []Record{person("keep@example.com", "K", "P", "H1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openURL(t, u) // a second Open of the same store (migrations are a no-op)
	got, err := s.Get(ctx, MD5Key(EmailMD5("keep@example.com")))
	if err != nil || got.Email != "keep@example.com" {
		t.Fatalf("after reopen: %v, %v", got, err)
	}
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"bolt://" + filepath.Join(dir, "a", "p.db"), true},
		{"bbolt://" + filepath.Join(dir, "b.db") + "?nosync=true&timeout=1s", true},
		{"bolt://" + filepath.Join(dir, "c.db") + "?nosync=maybe", false},
		{"bolt://" + filepath.Join(dir, "c.db") + "?timeout=soon", false},
		{"bolt://", false},
		{"mysql://x", false},
		{"postgres://localhost/x?schema=Bad-Name", false},
		{"::", false},
	} {
		s, err := Open(ctx, tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("Open(%q): err = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if s != nil {
			s.Close()
		}
	}
	// The bolt file is locked while open.
	u := "bolt://" + filepath.Join(dir, "locked.db") + "?timeout=50ms"
	openURL(t, u)
	if s2, err := Open(ctx, u); err == nil {
		s2.Close()
		t.Error("second Open of a locked bolt file succeeded")
	}
}

func TestPostgresConcurrentOpen(t *testing.T) {
	u := pgTestURL(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := Open(context.Background(), u)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
}
