package people

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgreSQL layout, in the URL's schema (default public):
//
//	people                  one row per person (columns: pgColumns)
//	  PRIMARY KEY (email)
//	  INDEX (email_md5), INDEX (email_sha1), INDEX (household_id),
//	  INDEX (last_name_norm, zip5), INDEX (last_name_norm, state, city_norm)
//	people_alt_emails       a person's other addresses (email primary key,
//	                        email_md5, email_sha1, owner -> people.email
//	                        ON DELETE CASCADE), indexed on the digests and owner
//	people_phone_status     phone status reference data (phone E.164
//	                        primary key, status, prepaid, connected_score)
//	people_schema_version   the migration version (one row)
//
// people.alt_emails repeats the other addresses (text[]) so that a record
// reads in one row; people_alt_emails indexes them for lookups. An address
// two people list points at the one written last; one that is also a
// person's email finds that person.
//
// email_md5 and email_sha1 are the raw 16- and 20-byte digests of the
// normalised email; demographic fields are their bucket text (empty when
// unknown), rfm fields their text, interests a text[] of interest names.
// last_name_norm, zip5 and city_norm (pgDerivedColumns) are
// NormalizeName(last_name), NormalizeZip(zip) and NormalizeName(city),
// computed in Go on upsert, for FindByNamePostal.
var pgColumns = []string{
	"email", "email_md5", "email_sha1", "household_id",
	"first_name", "middle_name", "last_name", "street", "city", "state", "zip",
	"age", "gender", "household_income", "net_worth", "home_market_value",
	"home_owner_status", "length_of_residence", "marital_status",
	"presence_of_children", "education", "occupation", "interests",
	"life_stage_segment", "life_stage_group", "financial_segment", "financial_group",
	"rfm_offline_avg_days", "rfm_online_avg_days", "rfm_avg_dollars", "rfm_last_order",
	"alt_emails",
}

// pgDerivedColumns are written after pgColumns but never read back.
var pgDerivedColumns = []string{"last_name_norm", "zip5", "city_norm"}

// pgWriteColumns is pgColumns then pgDerivedColumns: what pgRow returns.
var pgWriteColumns = append(slices.Clip(pgColumns), pgDerivedColumns...)

// pgMigrations[i] takes the schema from version i to i+1. %[1]s is the
// quoted schema name. Append only.
var pgMigrations = [][]string{
	{
		`CREATE TABLE %[1]s.people (
	email                text PRIMARY KEY,
	email_md5            bytea NOT NULL,
	email_sha1           bytea NOT NULL,
	household_id         text NOT NULL DEFAULT '',
	first_name           text NOT NULL DEFAULT '',
	middle_name          text NOT NULL DEFAULT '',
	last_name            text NOT NULL DEFAULT '',
	street               text NOT NULL DEFAULT '',
	city                 text NOT NULL DEFAULT '',
	state                text NOT NULL DEFAULT '',
	zip                  text NOT NULL DEFAULT '',
	age                  text NOT NULL DEFAULT '',
	gender               text NOT NULL DEFAULT '',
	household_income     text NOT NULL DEFAULT '',
	net_worth            text NOT NULL DEFAULT '',
	home_market_value    text NOT NULL DEFAULT '',
	home_owner_status    text NOT NULL DEFAULT '',
	length_of_residence  text NOT NULL DEFAULT '',
	marital_status       text NOT NULL DEFAULT '',
	presence_of_children text NOT NULL DEFAULT '',
	education            text NOT NULL DEFAULT '',
	occupation           text NOT NULL DEFAULT '',
	interests            text[] NOT NULL DEFAULT '{}'
)`,
		`CREATE INDEX people_email_md5_idx ON %[1]s.people (email_md5)`,
		`CREATE INDEX people_email_sha1_idx ON %[1]s.people (email_sha1)`,
		`CREATE INDEX people_household_id_idx ON %[1]s.people (household_id)`,
	},
	{
		`ALTER TABLE %[1]s.people
	ADD COLUMN last_name_norm text NOT NULL DEFAULT '',
	ADD COLUMN zip5           text NOT NULL DEFAULT ''`,
		`CREATE INDEX people_last_name_norm_zip5_idx ON %[1]s.people (last_name_norm, zip5)`,
	},
	{
		`ALTER TABLE %[1]s.people
	ADD COLUMN life_stage_segment   text NOT NULL DEFAULT '',
	ADD COLUMN life_stage_group     text NOT NULL DEFAULT '',
	ADD COLUMN financial_segment    text NOT NULL DEFAULT '',
	ADD COLUMN financial_group      text NOT NULL DEFAULT '',
	ADD COLUMN rfm_offline_avg_days text NOT NULL DEFAULT '',
	ADD COLUMN rfm_online_avg_days  text NOT NULL DEFAULT '',
	ADD COLUMN rfm_avg_dollars      text NOT NULL DEFAULT '',
	ADD COLUMN rfm_last_order       text NOT NULL DEFAULT '',
	ADD COLUMN city_norm            text NOT NULL DEFAULT ''`,
		`CREATE INDEX people_last_name_norm_state_city_norm_idx ON %[1]s.people (last_name_norm, state, city_norm)`,
	},
	{
		// Existing people have no other addresses: the defaults are right.
		`ALTER TABLE %[1]s.people ADD COLUMN alt_emails text[] NOT NULL DEFAULT '{}'`,
		`CREATE TABLE %[1]s.people_alt_emails (
	email      text PRIMARY KEY,
	email_md5  bytea NOT NULL,
	email_sha1 bytea NOT NULL,
	owner      text NOT NULL REFERENCES %[1]s.people (email) ON DELETE CASCADE
)`,
		`CREATE INDEX people_alt_emails_md5_idx ON %[1]s.people_alt_emails (email_md5)`,
		`CREATE INDEX people_alt_emails_sha1_idx ON %[1]s.people_alt_emails (email_sha1)`,
		`CREATE INDEX people_alt_emails_owner_idx ON %[1]s.people_alt_emails (owner)`,
		`CREATE TABLE %[1]s.people_phone_status (
	phone           text PRIMARY KEY,
	status          text NOT NULL DEFAULT '',
	prepaid         boolean,
	connected_score smallint CHECK (connected_score BETWEEN 0 AND 100)
)`,
	},
}

// pgMigrationHooks[i], when set, runs after the statements of
// pgMigrations[i], in the same transaction, for what SQL cannot do the
// way the Go code does.
var pgMigrationHooks = map[int]func(ctx context.Context, tx pgx.Tx, qs string) error{
	1: backfillPostal,
	2: backfillCity,
}

// backfillCity fills city_norm of existing rows.
func backfillCity(ctx context.Context, tx pgx.Tx, qs string) error {
	rows, err := tx.Query(ctx, "SELECT email, city FROM "+qs+".people WHERE city <> ''")
	if err != nil {
		return err
	}
	var emails, cities []string
	for rows.Next() {
		var e, c string
		if err := rows.Scan(&e, &c); err != nil {
			rows.Close()
			return err
		}
		if c = NormalizeName(c); c != "" {
			emails, cities = append(emails, e), append(cities, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(emails) == 0 {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE "+qs+".people AS p SET city_norm = u.c"+
		" FROM unnest($1::text[], $2::text[]) AS u(e, c) WHERE p.email = u.e", emails, cities)
	return err
}

// backfillPostal fills last_name_norm and zip5 of existing rows.
func backfillPostal(ctx context.Context, tx pgx.Tx, qs string) error {
	rows, err := tx.Query(ctx, "SELECT email, last_name, zip FROM "+qs+".people")
	if err != nil {
		return err
	}
	var emails, lasts, zips []string
	for rows.Next() {
		var e, l, z string
		if err := rows.Scan(&e, &l, &z); err != nil {
			rows.Close()
			return err
		}
		if l, z = NormalizeName(l), NormalizeZip(z); l != "" || z != "" {
			emails, lasts, zips = append(emails, e), append(lasts, l), append(zips, z)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(emails) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, "UPDATE "+qs+".people AS p SET last_name_norm = u.l, zip5 = u.z"+
		" FROM unnest($1::text[], $2::text[], $3::text[]) AS u(e, l, z) WHERE p.email = u.e", emails, lasts, zips)
	return err
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

type pgStore struct {
	pool    *pgxpool.Pool
	table   string // quoted schema.people
	alt     string // quoted schema.people_alt_emails
	phones  string // quoted schema.people_phone_status
	selCol  string // select list
	pSelCol string // select list qualified by "p."
	upsert  string // INSERT ... ON CONFLICT for one row ($1..$N, N = len(pgWriteColumns))
	merge   string // INSERT ... SELECT FROM people_stage ON CONFLICT
}

// pgCopyThreshold: Upsert of more records than this goes through COPY into
// a temporary staging table; fewer are sent as one pipelined batch of
// single-row upserts.
const pgCopyThreshold = 64

func openPostgres(ctx context.Context, u *url.URL) (Store, error) {
	q := u.Query()
	schema := q.Get("schema")
	if schema == "" {
		schema = "public"
	}
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("people: schema name must match %s", schemaName)
	}
	q.Del("schema")
	u2 := *u
	u2.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u2.String())
	if err != nil {
		return nil, fmt.Errorf("people: postgres URL: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("people: postgres: %w", err)
	}
	qs := pgx.Identifier{schema}.Sanitize()
	s := &pgStore{pool: pool, table: qs + ".people", alt: qs + ".people_alt_emails", phones: qs + ".people_phone_status"}
	if err := migratePostgres(ctx, pool, schema, qs); err != nil {
		pool.Close()
		return nil, err
	}
	s.selCol = pgSelectList("")
	writeCol := strings.Join(pgWriteColumns, ", ")
	s.pSelCol = pgSelectList("p.")
	var ph, set, old, neu []string
	for i, c := range pgWriteColumns {
		ph = append(ph, fmt.Sprintf("$%d", i+1))
		if c != "email" {
			set = append(set, c+" = EXCLUDED."+c)
			old = append(old, "p."+c)
			neu = append(neu, "EXCLUDED."+c)
		}
	}
	onConflict := fmt.Sprintf(" ON CONFLICT (email) DO UPDATE SET %s WHERE (%s) IS DISTINCT FROM (%s)",
		strings.Join(set, ", "), strings.Join(old, ", "), strings.Join(neu, ", "))
	s.upsert = fmt.Sprintf("INSERT INTO %s AS p (%s) VALUES (%s)", s.table, writeCol, strings.Join(ph, ", ")) + onConflict
	s.merge = fmt.Sprintf("INSERT INTO %s AS p (%s) SELECT %s FROM people_stage", s.table, writeCol, writeCol) + onConflict
	return s, nil
}

// pgSelectList is pgColumns as a select list, each qualified by prefix.
// alt_emails comes as NULL when empty (most people): pgx decodes a NULL
// far faster than an empty text[], which cost about 1 µs a row.
func pgSelectList(prefix string) string {
	cols := make([]string, len(pgColumns))
	for i, c := range pgColumns {
		cols[i] = prefix + c
		if c == "alt_emails" {
			cols[i] = "nullif(" + prefix + c + ", '{}')"
		}
	}
	return strings.Join(cols, ", ")
}

func migratePostgres(ctx context.Context, pool *pgxpool.Pool, schema, qs string) error {
	h := fnv.New64a()
	h.Write([]byte("emaildata/internal/people/" + schema))
	lock := int64(h.Sum64())
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+qs); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+qs+".people_schema_version (version integer NOT NULL)"); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+qs+".people_schema_version").Scan(&v); err != nil {
			return err
		}
		if v > len(pgMigrations) {
			return fmt.Errorf("schema version %d is newer than this program's %d", v, len(pgMigrations))
		}
		if v == len(pgMigrations) {
			return nil
		}
		for i := v; i < len(pgMigrations); i++ {
			for _, stmt := range pgMigrations[i] {
				if _, err := tx.Exec(ctx, fmt.Sprintf(stmt, qs)); err != nil {
					return err
				}
			}
			if hook := pgMigrationHooks[i]; hook != nil {
				if err := hook(ctx, tx, qs); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+qs+".people_schema_version"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+qs+".people_schema_version (version) VALUES ($1)", len(pgMigrations))
		return err
	})
	if err != nil {
		return fmt.Errorf("people: postgres schema: %w", err)
	}
	return nil
}

func (s *pgStore) Close() error {
	s.pool.Close()
	return nil
}

func pgRow(r *Record) []any {
	m, h := md5.Sum([]byte(r.Email)), sha1.Sum([]byte(r.Email))
	in := r.Interests.Names()
	if in == nil {
		in = []string{}
	}
	alts := r.AltEmails
	if alts == nil {
		alts = []string{}
	}
	return []any{
		r.Email, m[:], h[:], r.HouseholdID,
		r.First, r.Middle, r.Last, r.Street, r.City, r.State, r.Zip,
		r.Age, r.Gender, r.HouseholdIncome, r.NetWorth, r.HomeMarketValue,
		r.HomeOwnerStatus, r.LengthOfResidence, r.MaritalStatus,
		r.PresenceOfChildren, r.Education, r.Occupation, in,
		r.LifeStageSegment, r.LifeStageGroup, r.FinancialSegment, r.FinancialGroup,
		r.RFMOfflineAvgDays, r.RFMOnlineAvgDays, r.RFMAvgDollars, r.RFMLastOrder,
		alts,
		NormalizeName(r.Last), NormalizeZip(r.Zip), NormalizeName(r.City),
	}
}

func (s *pgStore) Upsert(ctx context.Context, recs []Record) error {
	recs, err := prepare(recs)
	if err != nil || len(recs) == 0 {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(recs) <= pgCopyThreshold {
			b := &pgx.Batch{}
			for i := range recs {
				b.Queue(s.upsert, pgRow(&recs[i])...)
			}
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			return s.upsertAlts(ctx, tx, recs)
		}
		if _, err := tx.Exec(ctx, "CREATE TEMP TABLE people_stage (LIKE "+s.table+" INCLUDING DEFAULTS) ON COMMIT DROP"); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"people_stage"}, pgWriteColumns,
			pgx.CopyFromSlice(len(recs), func(i int) ([]any, error) { return pgRow(&recs[i]), nil }))
		if err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, s.merge); err != nil {
			return err
		}
		return s.upsertAlts(ctx, tx, recs)
	})
	if err != nil {
		return fmt.Errorf("people: postgres upsert: %w", err)
	}
	return nil
}

// upsertAlts replaces the other addresses of recs in people_alt_emails:
// those recs no longer list are removed (when they still point at them),
// the listed ones point at their owner.
func (s *pgStore) upsertAlts(ctx context.Context, tx pgx.Tx, recs []Record) error {
	owners := make([]string, len(recs))
	for i := range recs {
		owners[i] = recs[i].Email
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+s.alt+" WHERE owner = ANY($1)", owners); err != nil {
		return err
	}
	claims := altClaims(recs)
	if len(claims) == 0 {
		return nil
	}
	emails, md5s, sha1s, by := make([]string, len(claims)), make([][]byte, len(claims)), make([][]byte, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		m, h := md5.Sum([]byte(c.email)), sha1.Sum([]byte(c.email))
		emails[i], md5s[i], sha1s[i], by[i] = c.email, m[:], h[:], c.owner
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+s.alt+" (email, email_md5, email_sha1, owner)"+
		" SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::text[])"+
		" ON CONFLICT (email) DO UPDATE SET owner = EXCLUDED.owner", emails, md5s, sha1s, by)
	return err
}

func (s *pgStore) Delete(ctx context.Context, emails []string) error {
	emails = normEmails(emails)
	if len(emails) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE email = ANY($1)", emails); err != nil {
		return fmt.Errorf("people: postgres delete: %w", err)
	}
	return nil
}

// scanPerson reads one row of selCol (then extra) into r and returns its
// digests.
func scanPerson(rows pgx.Rows, r *Record, extra ...any) (m, h []byte, err error) {
	var in []string
	dest := []any{&r.Email, &m, &h, &r.HouseholdID,
		&r.First, &r.Middle, &r.Last, &r.Street, &r.City, &r.State, &r.Zip,
		&r.Age, &r.Gender, &r.HouseholdIncome, &r.NetWorth, &r.HomeMarketValue,
		&r.HomeOwnerStatus, &r.LengthOfResidence, &r.MaritalStatus,
		&r.PresenceOfChildren, &r.Education, &r.Occupation, &in,
		&r.LifeStageSegment, &r.LifeStageGroup, &r.FinancialSegment, &r.FinancialGroup,
		&r.RFMOfflineAvgDays, &r.RFMOnlineAvgDays, &r.RFMAvgDollars, &r.RFMLastOrder, &r.AltEmails}
	if err = rows.Scan(append(dest, extra...)...); err != nil {
		return nil, nil, err
	}
	if len(r.AltEmails) == 0 {
		r.AltEmails = nil
	}
	for _, n := range in {
		if i, ok := interestIndex[n]; ok {
			r.Interests |= 1 << i
		}
	}
	return m, h, nil
}

func (s *pgStore) Get(ctx context.Context, key Key) (*Record, error) {
	recs, err := s.LookupBatch(ctx, []Key{key})
	if err != nil {
		return nil, err
	}
	if recs[0] == nil {
		return nil, ErrNotFound
	}
	return recs[0], nil
}

// pgLookupChunk: LookupBatch splits larger batches into chunks of at least
// this many keys, run concurrently on separate connections (up to
// GOMAXPROCS of them), so that the server can use more than one core.
const pgLookupChunk = 2048

func (s *pgStore) LookupBatch(ctx context.Context, keys []Key) ([]*Record, error) {
	out := make([]*Record, len(keys))
	err := parallel(len(keys), pgLookupChunk, func(lo, hi int) error {
		return s.lookupRange(ctx, keys[lo:hi], out[lo:hi])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lookupRange looks keys up with one query per key kind, sent as one
// pipelined batch, and stores the records in out (aligned with keys); then
// the keys that found nobody, if any, the same way in people_alt_emails (a
// second round trip only then: the alt table is not probed for the keys
// people found, which are most of them).
func (s *pgStore) lookupRange(ctx context.Context, keys []Key, out []*Record) error {
	if err := s.lookupPass(ctx, groupKeys(keys), false, out); err != nil {
		return err
	}
	var missing []Key
	for i, r := range out {
		if r == nil {
			if missing == nil {
				missing = make([]Key, len(keys)) // found ones stay Key{}: they match nothing
			}
			missing[i] = keys[i]
		}
	}
	if missing == nil {
		return nil
	}
	return s.lookupPass(ctx, groupKeys(missing), true, out)
}

// lookupPass sends one query per kind of g, in people or (alt) in
// people_alt_emails, as one pipelined batch.
func (s *pgStore) lookupPass(ctx context.Context, g *keyGroups, alt bool, out []*Record) error {
	b, queries := s.lookupBatch(g, alt)
	if len(queries) == 0 {
		return nil
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, q := range queries {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("people: postgres lookup: %w", err)
		}
		if err := scanLookup(rows, q, g.pos[q.kind], out); err != nil {
			return fmt.Errorf("people: postgres lookup: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("people: postgres lookup: %w", err)
	}
	return nil
}

// keyGroups are the distinct key values per kind and, for each, the
// positions of the keys that carry it.
type keyGroups struct {
	pos         [KeySHA1 + 1]map[string][]int
	emails      []string
	md5s, sha1s [][]byte
}

func groupKeys(keys []Key) *keyGroups {
	g := &keyGroups{}
	for i, k := range keys {
		raw, ok := k.raw()
		if !ok {
			continue
		}
		if g.pos[k.Kind] == nil {
			g.pos[k.Kind] = make(map[string][]int)
		}
		p := g.pos[k.Kind]
		if _, seen := p[string(raw)]; !seen {
			switch k.Kind {
			case KeyEmail:
				g.emails = append(g.emails, string(raw))
			case KeyMD5:
				g.md5s = append(g.md5s, raw)
			case KeySHA1:
				g.sha1s = append(g.sha1s, raw)
			}
		}
		p[string(raw)] = append(p[string(raw)], i)
	}
	return g
}

// lookupQuery is one query of a lookup batch: by kind, in people or
// (alt) in people_alt_emails.
type lookupQuery struct {
	kind KeyKind
	alt  bool
}

// lookupBatch queues one query per kind that has keys, in people or (alt)
// in people_alt_emails (then also selecting the matched column), in the
// order of the queries it returns.
func (s *pgStore) lookupBatch(g *keyGroups, alt bool) (*pgx.Batch, []lookupQuery) {
	b := &pgx.Batch{}
	var qs []lookupQuery
	sel := "SELECT " + s.selCol + " FROM " + s.table + " WHERE "
	selAlt := "SELECT " + s.pSelCol + ", a.%[1]s FROM " + s.alt + " AS a JOIN " + s.table + " AS p ON p.email = a.owner WHERE a.%[1]s "
	// One value: a plain equality (a single GET /v5/td), cheaper for the
	// server than an array.
	queue := func(q string, vals []string, raws [][]byte) {
		switch {
		case len(vals) == 1:
			b.Queue(q+"= $1", vals[0])
		case len(raws) == 1:
			b.Queue(q+"= $1", raws[0])
		case vals != nil:
			b.Queue(q+"= ANY($1)", vals)
		default:
			b.Queue(q+"= ANY($1)", raws)
		}
	}
	for _, k := range []struct {
		kind KeyKind
		col  string
		vals []string
		raws [][]byte
	}{
		{KeyEmail, "email", g.emails, nil}, {KeyMD5, "email_md5", nil, g.md5s}, {KeySHA1, "email_sha1", nil, g.sha1s},
	} {
		if len(k.vals) == 0 && len(k.raws) == 0 {
			continue
		}
		q := sel + k.col + " "
		if alt {
			q = fmt.Sprintf(selAlt, k.col)
		}
		queue(q, k.vals, k.raws)
		qs = append(qs, lookupQuery{k.kind, alt})
	}
	return b, qs
}

// scanLookup stores each found record at the positions of the keys of
// this kind that match it (a copy for each after the first), then closes
// rows. Alt queries fill only positions still empty.
func scanLookup(rows pgx.Rows, q lookupQuery, pos map[string][]int, out []*Record) error {
	for rows.Next() {
		r := new(Record)
		var extra []any
		var matched []byte
		if q.alt {
			extra = []any{&matched}
		}
		m, h, err := scanPerson(rows, r, extra...)
		if err != nil {
			rows.Close()
			return err
		}
		k := r.Email
		switch {
		case q.alt:
			k = string(matched)
		case q.kind == KeyMD5:
			k = string(m)
		case q.kind == KeySHA1:
			k = string(h)
		}
		n := 0
		for _, i := range pos[k] {
			if q.alt && out[i] != nil {
				continue
			}
			if n == 0 {
				out[i] = r
			} else {
				c := *r
				out[i] = &c
			}
			n++
		}
	}
	rows.Close()
	return rows.Err()
}

func (s *pgStore) Household(ctx context.Context, id string) ([]Record, error) {
	r, err := s.HouseholdBatch(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	return r[0], nil
}

func (s *pgStore) HouseholdBatch(ctx context.Context, ids []string) ([][]Record, error) {
	out := make([][]Record, len(ids))
	want := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+s.selCol+" FROM "+s.table+
		" WHERE household_id = ANY($1) ORDER BY household_id, email", want)
	if err != nil {
		return nil, fmt.Errorf("people: postgres household: %w", err)
	}
	defer rows.Close()
	byID := make(map[string][]Record)
	for rows.Next() {
		var r Record
		if _, _, err := scanPerson(rows, &r); err != nil {
			return nil, fmt.Errorf("people: postgres household: %w", err)
		}
		byID[r.HouseholdID] = append(byID[r.HouseholdID], r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("people: postgres household: %w", err)
	}
	used := make(map[string]bool, len(byID))
	for i, id := range ids {
		if id == "" {
			continue
		}
		if used[id] {
			out[i] = slices.Clone(byID[id])
		} else {
			out[i], used[id] = byID[id], true
		}
	}
	return out, nil
}

// FindByNamePostal implements NamePostalFinder: one query for the distinct
// zip keys of the batch, joined on the (last_name_norm, zip5) index, and
// one for the distinct city and state keys, joined on the (last_name_norm,
// state, city_norm) index, sent as one pipelined batch.
func (s *pgStore) FindByNamePostal(ctx context.Context, keys []NamePostalKey) ([][]Record, error) {
	out := make([][]Record, len(keys))
	pos := make(map[normKey][]int)
	var zl, zz, ll, ls, lc []string
	for i, k := range keys {
		nk, ok := k.norm()
		if !ok {
			continue
		}
		if _, seen := pos[nk]; !seen {
			if nk.zip != "" {
				zl, zz = append(zl, nk.last), append(zz, nk.zip)
			} else {
				ll, ls, lc = append(ll, nk.last), append(ls, nk.state), append(lc, nk.city)
			}
		}
		pos[nk] = append(pos[nk], i)
	}
	b := &pgx.Batch{}
	var zipQuery []bool
	sel := "SELECT " + s.pSelCol + " FROM " + s.table + " AS p"
	if len(zl) > 0 {
		b.Queue(sel+" JOIN unnest($1::text[], $2::text[]) AS k(l, z) ON p.last_name_norm = k.l AND p.zip5 = k.z ORDER BY p.email", zl, zz)
		zipQuery = append(zipQuery, true)
	}
	if len(ll) > 0 {
		b.Queue(sel+" JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(l, s, c)"+
			" ON p.last_name_norm = k.l AND p.state = k.s AND p.city_norm = k.c ORDER BY p.email", ll, ls, lc)
		zipQuery = append(zipQuery, false)
	}
	if len(zipQuery) == 0 {
		return out, nil
	}
	byKey := make(map[normKey][]Record)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, byZip := range zipQuery {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("people: postgres name/postal lookup: %w", err)
		}
		for rows.Next() {
			var r Record
			if _, _, err := scanPerson(rows, &r); err != nil {
				rows.Close()
				return nil, fmt.Errorf("people: postgres name/postal lookup: %w", err)
			}
			k := normKey{last: NormalizeName(r.Last), zip: NormalizeZip(r.Zip)}
			if !byZip {
				k = normKey{last: k.last, city: NormalizeName(r.City), state: r.State}
			}
			byKey[k] = append(byKey[k], r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("people: postgres name/postal lookup: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("people: postgres name/postal lookup: %w", err)
	}
	for k, is := range pos {
		for n, i := range is {
			if n == 0 {
				out[i] = byKey[k]
			} else {
				out[i] = slices.Clone(byKey[k])
			}
		}
	}
	return out, nil
}

func (s *pgStore) UpsertPhones(ctx context.Context, recs []PhoneStatus) error {
	if err := checkPhones(recs); err != nil || len(recs) == 0 {
		return err
	}
	// One row per number, the last one winning (ON CONFLICT cannot touch
	// a row twice in one statement).
	at := make(map[string]int, len(recs))
	var phones, statuses []string
	var prepaid []*bool
	var scores []*int32
	for _, r := range recs {
		var sc *int32
		if r.ConnectedScore != nil {
			sc = new(int32(*r.ConnectedScore))
		}
		if i, ok := at[r.Phone]; ok {
			statuses[i], prepaid[i], scores[i] = r.Status, r.Prepaid, sc
			continue
		}
		at[r.Phone] = len(phones)
		phones, statuses, prepaid, scores = append(phones, r.Phone), append(statuses, r.Status), append(prepaid, r.Prepaid), append(scores, sc)
	}
	_, err := s.pool.Exec(ctx, "INSERT INTO "+s.phones+" (phone, status, prepaid, connected_score)"+
		" SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::int[])"+
		" ON CONFLICT (phone) DO UPDATE SET status = EXCLUDED.status, prepaid = EXCLUDED.prepaid, connected_score = EXCLUDED.connected_score",
		phones, statuses, prepaid, scores)
	if err != nil {
		return fmt.Errorf("people: postgres phone upsert: %w", err)
	}
	return nil
}

func (s *pgStore) LookupPhone(ctx context.Context, e164 string) (*PhoneStatus, error) {
	r := &PhoneStatus{Phone: e164}
	var score *int32
	err := s.pool.QueryRow(ctx, "SELECT status, prepaid, connected_score FROM "+s.phones+" WHERE phone = $1", e164).
		Scan(&r.Status, &r.Prepaid, &score)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("people: postgres phone lookup: %w", err)
	}
	if score != nil {
		r.ConnectedScore = new(int(*score))
	}
	return r, nil
}
