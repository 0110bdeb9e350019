package fraud

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PgDB is what PostgresHistory needs of a database handle; *pgxpool.Pool,
// *pgx.Conn and pgx.Tx implement it.
type PgDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PostgresOptions configure a PostgresHistory.
type PostgresOptions struct {
	// Table is the events table ("fraud_events" by default); first-seen
	// dates live in Table+"_first_seen", fraud reports in Table+"_reports". Lower-case letters, digits and
	// underscores only.
	Table string
	// Cap bounds every window count (512 by default, where the 0-10 scales
	// reach 10): counting stops there, which keeps queries cheap for very
	// popular domains and busy IPs.
	Cap int
}

// PostgresHistory is a History in PostgreSQL, shared by every API replica:
// they see the same counts and agree on first-seen dates (kept per address
// and domain in a separate table updated with LEAST, so concurrent first
// sightings keep the earliest). Events older than the longest window in use
// can be removed with Prune; first-seen rows are kept.
type PostgresHistory struct {
	db                     PgDB
	table                  string // unquoted name, validated
	events, first, reports string // quoted identifiers
	cap                    int
	statsSQL               string
	recordSQL              string
}

var pgIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,45}$`)

// NewPostgresHistory returns a history on db. Call Migrate once (it is
// idempotent and safe to run from several replicas at once) before use.
func NewPostgresHistory(db PgDB, o PostgresOptions) (*PostgresHistory, error) {
	if o.Table == "" {
		o.Table = "fraud_events"
	}
	if !pgIdent.MatchString(o.Table) {
		return nil, fmt.Errorf("fraud: bad table name %q", o.Table)
	}
	if o.Cap <= 0 {
		o.Cap = 512
	}
	h := &PostgresHistory{
		db:      db,
		table:   o.Table,
		events:  pgx.Identifier{o.Table}.Sanitize(),
		first:   pgx.Identifier{o.Table + "_first_seen"}.Sanitize(),
		reports: pgx.Identifier{o.Table + "_reports"}.Sanitize(),
		cap:     o.Cap,
	}
	r := strings.NewReplacer("{E}", h.events, "{F}", h.first, "{R}", h.reports)
	h.statsSQL = r.Replace(pgStatsSQL)
	h.recordSQL = r.Replace(pgRecordSQL)
	return h, nil
}

// Migrate creates the tables and indexes when missing. Concurrent calls
// are serialised with an advisory lock.
func (h *PostgresHistory) Migrate(ctx context.Context) error {
	f := fnv.New64a()
	f.Write([]byte("emaildata/fraud/" + h.table))
	lock := int64(f.Sum64() >> 1)
	r := strings.NewReplacer("{E}", h.events, "{F}", h.first, "{R}", h.reports, "{T}", h.table, "{LOCK}", fmt.Sprint(lock))
	// One Exec without arguments runs as one implicit transaction, so the
	// transaction-scoped advisory lock covers every statement.
	_, err := h.db.Exec(ctx, r.Replace(pgSchemaSQL))
	if err != nil {
		return fmt.Errorf("fraud: migrate history tables: %w", err)
	}
	return nil
}

const pgSchemaSQL = `
SELECT pg_advisory_xact_lock({LOCK});
CREATE TABLE IF NOT EXISTS {E} (
	id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at       timestamptz NOT NULL,
	email    text NOT NULL,
	domain   text NOT NULL DEFAULT '',
	tumbling text NOT NULL DEFAULT '',
	ip       text NOT NULL DEFAULT '',
	phone    text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS {T}_email_at ON {E} (email, at);
CREATE INDEX IF NOT EXISTS {T}_domain_at ON {E} (domain, at) WHERE domain <> '';
CREATE INDEX IF NOT EXISTS {T}_tumbling_at ON {E} (tumbling, at, email) WHERE tumbling <> '';
CREATE INDEX IF NOT EXISTS {T}_ip_at ON {E} (ip, at, email) WHERE ip <> '';
CREATE INDEX IF NOT EXISTS {T}_phone_at ON {E} (phone, at, email) WHERE phone <> '';
CREATE INDEX IF NOT EXISTS {T}_at ON {E} (at);
CREATE TABLE IF NOT EXISTS {F} (
	kind       text NOT NULL,
	key        text NOT NULL,
	first_seen timestamptz NOT NULL,
	last_seen  timestamptz NOT NULL,
	total      bigint NOT NULL,
	PRIMARY KEY (kind, key)
);
CREATE TABLE IF NOT EXISTS {R} (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at         timestamptz NOT NULL,
	fraud_type text NOT NULL,
	email      text NOT NULL,
	ip         text NOT NULL DEFAULT '',
	phone      text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS {T}_reports_email ON {R} (email);
CREATE INDEX IF NOT EXISTS {T}_reports_ip ON {R} (ip) WHERE ip <> '';
CREATE INDEX IF NOT EXISTS {T}_reports_phone ON {R} (phone) WHERE phone <> '';
`

// pgStatsSQL answers Stats in one round trip. $1 email, $2 domain,
// $3 tumbling, $4 ip, $5 phone, $6 since, $7 now, $8 cap.
const pgStatsSQL = `
SELECT
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE email = $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE domain = $2 AND domain <> '' AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT DISTINCT email FROM {E} WHERE tumbling = $3 AND tumbling <> '' AND email <> $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE ip = $4 AND ip <> '' AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT DISTINCT email FROM {E} WHERE ip = $4 AND ip <> '' AND email <> $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE phone = $5 AND phone <> '' AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT DISTINCT email FROM {E} WHERE phone = $5 AND phone <> '' AND email <> $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	e.first_seen, coalesce(e.total, 0), d.first_seen, coalesce(d.total, 0),
	(SELECT count(*) FROM (SELECT 1 FROM {R} WHERE email = $1 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {R} WHERE ip = $4 AND $4 <> '' LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {R} WHERE phone = $5 AND $5 <> '' LIMIT $8) x)
FROM (SELECT 1) one
LEFT JOIN {F} e ON e.kind = 'e' AND e.key = $1
LEFT JOIN {F} d ON d.kind = 'd' AND d.key = $2 AND $2 <> ''
`

// pgRecordSQL inserts the event and updates first-seen rows in one
// statement. $1 at, $2 email, $3 domain, $4 tumbling, $5 ip, $6 phone.
const pgRecordSQL = `
WITH ins AS (
	INSERT INTO {E} (at, email, domain, tumbling, ip, phone) VALUES ($1, $2, $3, $4, $5, $6)
)
INSERT INTO {F} AS f (kind, key, first_seen, last_seen, total)
SELECT k, v, $1, $1, 1 FROM (VALUES ('e', $2::text), ('d', $3::text)) s(k, v) WHERE v <> ''
ON CONFLICT (kind, key) DO UPDATE SET
	first_seen = LEAST(f.first_seen, EXCLUDED.first_seen),
	last_seen  = GREATEST(f.last_seen, EXCLUDED.last_seen),
	total      = f.total + 1
`

// Record implements History.
func (h *PostgresHistory) Record(ctx context.Context, ev Event) error {
	_, err := h.db.Exec(ctx, h.recordSQL, ev.At, ev.Email, ev.Domain, ev.Tumbling, ev.IP, ev.Phone)
	if err != nil {
		return fmt.Errorf("fraud: record history: %w", err)
	}
	return nil
}

// Report implements History: one statement for all reports.
func (h *PostgresHistory) Report(ctx context.Context, reports []Report) error {
	if len(reports) == 0 {
		return nil
	}
	at := make([]time.Time, len(reports))
	typ, email, ip, phone := make([]string, len(reports)), make([]string, len(reports)), make([]string, len(reports)), make([]string, len(reports))
	for i, r := range reports {
		at[i], typ[i], email[i], ip[i], phone[i] = r.At, r.Type, r.Email, r.IP, r.Phone
	}
	_, err := h.db.Exec(ctx, "INSERT INTO "+h.reports+" (at, fraud_type, email, ip, phone)"+
		" SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[])", at, typ, email, ip, phone)
	if err != nil {
		return fmt.Errorf("fraud: record reports: %w", err)
	}
	return nil
}

// Stats implements History.
func (h *PostgresHistory) Stats(ctx context.Context, k Keys, now time.Time, window time.Duration) (Stats, error) {
	var (
		s           Stats
		eFirst      *time.Time
		dFirst      *time.Time
		tumbling    int
		emailN      int
		domainN     int
		ipN, ipD    int
		phoneN, phD int
	)
	err := h.db.QueryRow(ctx, h.statsSQL, k.Email, k.Domain, k.Tumbling, k.IP, k.Phone, now.Add(-window), now, h.cap).
		Scan(&emailN, &domainN, &tumbling, &ipN, &ipD, &phoneN, &phD, &eFirst, &s.EmailTotal, &dFirst, &s.DomainTotal,
			&s.EmailReports, &s.IPReports, &s.PhoneReports)
	if err != nil {
		return Stats{}, fmt.Errorf("fraud: history stats: %w", err)
	}
	s.EmailCount, s.DomainCount, s.TumblingVariants = emailN, domainN, tumbling
	s.IPCount, s.IPDistinctEmails, s.PhoneCount, s.PhoneDistinctEmails = ipN, ipD, phoneN, phD
	if eFirst != nil {
		s.EmailFirstSeen = *eFirst
	}
	if dFirst != nil {
		s.DomainFirstSeen = *dFirst
	}
	return s, nil
}

// Prune deletes events before t in batches and returns how many were
// deleted. First-seen rows and reports are kept.
func (h *PostgresHistory) Prune(ctx context.Context, before time.Time) (int64, error) {
	q := "DELETE FROM " + h.events + " WHERE id IN (SELECT id FROM " + h.events + " WHERE at < $1 LIMIT 10000)"
	var total int64
	for {
		tag, err := h.db.Exec(ctx, q, before)
		if err != nil {
			return total, fmt.Errorf("fraud: prune history: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 10000 {
			return total, nil
		}
	}
}
