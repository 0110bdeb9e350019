package people

import (
	"context"
	"net/url"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
)

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"O'Neil":        "oneil",
		" Smith-Jones ": "smithjones",
		"MÜLLER":        "müller",
		"J. 3rd":        "jrd",
		"123 -":         "",
		"Ñúñez":         "ñúñez",
	} {
		if got := NormalizeName(in); got != want {
			t.Errorf("NormalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func postalRec(email, first, last, zip, hh string) Record {
	r := person(email, first, last, hh)
	r.Zip = zip
	return r
}

// findEmails runs FindByNamePostal and returns the emails per key.
func findEmails(t *testing.T, s Store, keys ...NamePostalKey) [][]string {
	t.Helper()
	f, ok := s.(NamePostalFinder)
	if !ok {
		t.Fatalf("%T does not implement NamePostalFinder", s)
	}
	res, err := f.FindByNamePostal(context.Background(), keys)
	if err != nil {
		t.Fatalf("FindByNamePostal: %v", err)
	}
	if len(res) != len(keys) {
		t.Fatalf("FindByNamePostal returned %d results for %d keys", len(res), len(keys))
	}
	out := make([][]string, len(res))
	for i, l := range res {
		out[i] = emails(l)
	}
	return out
}

func TestFindByNamePostal(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("Find", func(t *testing.T) { testFindByNamePostal(t, b.openStore(t)) })
			t.Run("Changes", func(t *testing.T) { testFindByNamePostalChanges(t, b.openStore(t)) })
			t.Run("Large", func(t *testing.T) { testFindByNamePostalLarge(t, b.openStore(t)) })
		})
	}
}

func testFindByNamePostal(t *testing.T, s Store) {
	ctx := context.Background()
	recs := []Record{
		postalRec("zed@example.com", "Zed", "O'Neil", "80203", "H1"),
		postalRec("amy@example.com", "Amy", "ONEIL", "80203-1234", "H1"),
		postalRec("bob@example.com", "Bob", "oneil", "80204", "H2"),
		postalRec("cy@example.com", "Cy", "Smith", "02138", "H3"),
		postalRec("noname@example.com", "No", "", "80203", "H4"),
	}
	if err := s.Upsert(ctx, recs); err != nil {
		t.Fatal(err)
	}
	got := findEmails(t, s,
		NamePostalKey{Last: "oneil", Zip: "80203"},
		NamePostalKey{Last: "O'Neil", Zip: "802031234"}, // normalised by the finder too
		NamePostalKey{Last: "oneil", Zip: "80204"},
		NamePostalKey{Last: "smith", Zip: "2138"},
		NamePostalKey{Last: "smith", Zip: "80203"},
		NamePostalKey{Last: "", Zip: "80203"},
		NamePostalKey{Last: "oneil", Zip: "bad"},
		NamePostalKey{Last: "oneil", Zip: "80203"}, // repeated
	)
	want := [][]string{
		{"amy@example.com", "zed@example.com"}, // ordered by email
		{"amy@example.com", "zed@example.com"},
		{"bob@example.com"},
		{"cy@example.com"},
		nil, nil, nil,
		{"amy@example.com", "zed@example.com"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FindByNamePostal = %q, want %q", got, want)
	}
	res, err := s.(NamePostalFinder).FindByNamePostal(ctx, []NamePostalKey{{Last: "smith", Zip: "02138"}})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0][0]
	if r.First != "Cy" || r.Last != "Smith" || r.Street != "12 Oak St" || r.City != "Denver" || r.State != "CO" ||
		r.Zip != "02138" || r.HouseholdID != "H3" || r.Age != "35-44" {
		t.Fatalf("record = %+v", r)
	}
	if res, err := s.(NamePostalFinder).FindByNamePostal(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("FindByNamePostal(nil) = %v, %v", res, err)
	}
	// Without a valid zip: last name, city and state.
	got = findEmails(t, s,
		NamePostalKey{Last: "oneil", City: "denver", State: "co"},
		NamePostalKey{Last: "Smith", City: "DENVER", State: " CO", Zip: "bad"},
		NamePostalKey{Last: "oneil", City: "Boulder", State: "CO"},
		NamePostalKey{Last: "oneil", City: "Denver"},                            // no state
		NamePostalKey{Last: "oneil", City: "Denver", State: "C"},                // not a state
		NamePostalKey{Last: "oneil", Zip: "80204", City: "Denver", State: "CO"}, // the zip wins
	)
	want = [][]string{
		{"amy@example.com", "bob@example.com", "zed@example.com"},
		{"cy@example.com"},
		nil, nil, nil,
		{"bob@example.com"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FindByNamePostal by city and state = %q, want %q", got, want)
	}
}

func testFindByNamePostalChanges(t *testing.T, s Store) {
	ctx := context.Background()
	if err := s.Upsert(ctx, []Record{
		postalRec("a@example.com", "A", "Lee", "80203", "H1"),
		postalRec("b@example.com", "B", "Lee", "80203", "H1"),
		postalRec("c@example.com", "C", "Lee", "80203", "H1"),
	}); err != nil {
		t.Fatal(err)
	}
	// a moves, b renames, c only changes first name.
	if err := s.Upsert(ctx, []Record{
		postalRec("a@example.com", "A", "Lee", "10001", "H9"),
		postalRec("b@example.com", "B", "Park", "80203", "H1"),
		postalRec("c@example.com", "Cee", "Lee", "80203", "H1"),
	}); err != nil {
		t.Fatal(err)
	}
	keys := []NamePostalKey{{Last: "lee", Zip: "80203"}, {Last: "lee", Zip: "10001"}, {Last: "park", Zip: "80203"},
		{Last: "lee", City: "Denver", State: "CO"}}
	want := [][]string{{"c@example.com"}, {"a@example.com"}, {"b@example.com"}, {"a@example.com", "c@example.com"}}
	if got := findEmails(t, s, keys...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after update: %q, want %q", got, want)
	}
	// Dropping the last name takes b out of the index.
	nb := postalRec("b@example.com", "B", "", "80203", "H1")
	if err := s.Upsert(ctx, []Record{nb}); err != nil {
		t.Fatal(err)
	}
	want[2] = nil
	if got := findEmails(t, s, keys...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after dropping a last name: %q, want %q", got, want)
	}
	// Moving to another city takes c out of Denver.
	nc := postalRec("c@example.com", "Cee", "Lee", "80203", "H1")
	nc.City = "Aurora"
	if err := s.Upsert(ctx, []Record{nc}); err != nil {
		t.Fatal(err)
	}
	want[3] = []string{"a@example.com"}
	if got := findEmails(t, s, keys...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a move: %q, want %q", got, want)
	}
	if err := s.Delete(ctx, []string{"C@example.com", "a@example.com"}); err != nil {
		t.Fatal(err)
	}
	want = [][]string{nil, nil, nil, nil}
	if got := findEmails(t, s, keys...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after delete: %q, want %q", got, want)
	}
}

// testFindByNamePostalLarge goes through the bulk paths (COPY for
// PostgreSQL, parallel lookups for bolt).
func testFindByNamePostalLarge(t *testing.T, s Store) {
	ctx := context.Background()
	recs := GenerateSlice(7, 3000)
	if err := s.Upsert(ctx, recs); err != nil {
		t.Fatal(err)
	}
	keys := make([]NamePostalKey, 2*len(recs))
	for i, r := range recs {
		keys[i] = NamePostalKey{Last: r.Last, Zip: r.Zip}
		keys[len(recs)+i] = NamePostalKey{Last: r.Last, City: r.City, State: r.State}
	}
	res, err := s.(NamePostalFinder).FindByNamePostal(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		r := &recs[i]
		r.Normalize()
		found := false
		for j, got := range res[i] {
			if NormalizeName(got.Last) != NormalizeName(r.Last) || NormalizeZip(got.Zip) != NormalizeZip(r.Zip) {
				t.Fatalf("key %d: record %q does not match", i, got.Email)
			}
			if j > 0 && res[i][j-1].Email >= got.Email {
				t.Fatalf("key %d: not ordered by email", i)
			}
			found = found || got.Email == r.Email
		}
		if !found && NormalizeName(r.Last) != "" && NormalizeZip(r.Zip) != "" {
			t.Fatalf("key %d: %s not found", i, r.Email)
		}
		found = false
		for _, got := range res[len(recs)+i] {
			if NormalizeName(got.Last) != NormalizeName(r.Last) || NormalizeName(got.City) != NormalizeName(r.City) || got.State != r.State {
				t.Fatalf("locality key %d: record %q does not match", i, got.Email)
			}
			found = found || got.Email == r.Email
		}
		if !found {
			t.Fatalf("locality key %d: %s not found", i, r.Email)
		}
	}
}

// TestBoltPostalBackfill opens a file made before the postal bucket: the
// index is built from the people bucket.
func TestBoltPostalBackfill(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "people.db")
	s, err := Open(ctx, "bolt://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, []Record{postalRec("a@example.com", "A", "Lee", "80203", "H1")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketPostal); err != nil {
			return err
		}
		return tx.DeleteBucket(bucketLocality)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openURL(t, "bolt://"+path)
	want := [][]string{{"a@example.com"}, {"a@example.com"}}
	if got := findEmails(t, s, NamePostalKey{Last: "lee", Zip: "80203"}, NamePostalKey{Last: "lee", City: "denver", State: "CO"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after backfill: %q, want %q", got, want)
	}
}

// TestPostgresPostalMigration migrates a version-1 schema with rows: the
// new columns are filled from the existing ones.
func TestPostgresPostalMigration(t *testing.T) {
	ctx := context.Background()
	u := pgTestURL(t)
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, []Record{postalRec("a@example.com", "A", "O'Neil", "80203-1234", "H1")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	schema := pgx.Identifier{mustQuery(t, u, "schema")}.Sanitize()
	c := requirePostgres(t)
	defer c.Close(ctx)
	for _, q := range append(append(dropMigration4(schema), dropMigration3(schema)...),
		"DROP INDEX "+schema+".people_last_name_norm_zip5_idx",
		"ALTER TABLE "+schema+".people DROP COLUMN last_name_norm, DROP COLUMN zip5",
		"UPDATE "+schema+".people_schema_version SET version = 1",
	) {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s = openURL(t, u)
	want := [][]string{{"a@example.com"}}
	if got := findEmails(t, s, NamePostalKey{Last: "oneil", Zip: "80203"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after migration: %q, want %q", got, want)
	}
	var v int
	if err := c.QueryRow(ctx, "SELECT version FROM "+schema+".people_schema_version").Scan(&v); err != nil || v != len(pgMigrations) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(pgMigrations))
	}
}

// dropMigration4 returns the statements that undo migration 4.
func dropMigration4(schema string) []string {
	return []string{
		"DROP TABLE " + schema + ".people_alt_emails",
		"DROP TABLE " + schema + ".people_phone_status",
		"ALTER TABLE " + schema + ".people DROP COLUMN alt_emails",
	}
}

// TestPostgresMigration4 migrates a version-3 schema with rows: they read
// back without other addresses, and take them on upsert.
func TestPostgresMigration4(t *testing.T) {
	ctx := context.Background()
	u := pgTestURL(t)
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	old := person("a@example.com", "A", "Lee", "H1")
	if err := s.Upsert(ctx, []Record{old}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	schema := pgx.Identifier{mustQuery(t, u, "schema")}.Sanitize()
	c := requirePostgres(t)
	defer c.Close(ctx)
	for _, q := range append(dropMigration4(schema), "UPDATE "+schema+".people_schema_version SET version = 3") {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s = openURL(t, u)
	if r, err := s.Get(ctx, EmailKey("a@example.com")); err != nil || !reflect.DeepEqual(*r, old) {
		t.Fatalf("migrated record = %+v, %v", r, err)
	}
	withAlt := old
	withAlt.AltEmails = []string{"a.lee@work.test"}
	if err := s.Upsert(ctx, []Record{withAlt}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, SHA1Key(EmailSHA1("A.Lee@work.test"))); err != nil || !reflect.DeepEqual(*r, withAlt) {
		t.Fatalf("by the other address after migration: %+v, %v", r, err)
	}
	if err := s.(PhoneStore).UpsertPhones(ctx, []PhoneStatus{{Phone: "+14155552671", Status: PhoneLive}}); err != nil {
		t.Fatal(err)
	}
}

// dropMigration3 returns the statements that undo migration 3.
func dropMigration3(schema string) []string {
	return []string{
		"DROP INDEX " + schema + ".people_last_name_norm_state_city_norm_idx",
		"ALTER TABLE " + schema + ".people DROP COLUMN life_stage_segment, DROP COLUMN life_stage_group," +
			" DROP COLUMN financial_segment, DROP COLUMN financial_group, DROP COLUMN rfm_offline_avg_days," +
			" DROP COLUMN rfm_online_avg_days, DROP COLUMN rfm_avg_dollars, DROP COLUMN rfm_last_order, DROP COLUMN city_norm",
	}
}

// TestPostgresMigration3 migrates a version-2 schema with rows: the rfm,
// life stage and financial columns come in empty, city_norm is filled, and
// the rows are found by last name, city and state.
func TestPostgresMigration3(t *testing.T) {
	ctx := context.Background()
	u := pgTestURL(t)
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, []Record{postalRec("a@example.com", "A", "O'Neil", "80203", "H1")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	schema := pgx.Identifier{mustQuery(t, u, "schema")}.Sanitize()
	c := requirePostgres(t)
	defer c.Close(ctx)
	for _, q := range append(append(dropMigration4(schema), dropMigration3(schema)...), "UPDATE "+schema+".people_schema_version SET version = 2") {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s = openURL(t, u)
	want := [][]string{{"a@example.com"}}
	if got := findEmails(t, s, NamePostalKey{Last: "oneil", City: "DENVER", State: "co"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after migration: %q, want %q", got, want)
	}
	r, err := s.Get(ctx, EmailKey("a@example.com"))
	if err != nil || r.Age != "35-44" || r.RFMLastOrder != "" || r.LifeStageGroup != "" {
		t.Fatalf("migrated record = %+v, %v", r, err)
	}
	full := person("a@example.com", "A", "O'Neil", "H1")
	if err := s.Upsert(ctx, []Record{full}); err != nil {
		t.Fatal(err)
	}
	if r, err = s.Get(ctx, EmailKey("a@example.com")); err != nil || !reflect.DeepEqual(*r, full) {
		t.Fatalf("after upsert: %+v, %v", r, err)
	}
}

func mustQuery(t *testing.T, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(name)
}
