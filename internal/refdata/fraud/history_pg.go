package fraud

import (
	"context"
	"errors"
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
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// PostgresOptions configure a PostgresHistory.
type PostgresOptions struct {
	// Table is the events table ("fraud_events" by default); first-seen
	// dates live in Table+"_first_seen", fraud reports in Table+"_reports",
	// their per-identifier summary in Table+"_report_marks" and each
	// tenant's report count in Table+"_report_counts". Lower-case letters,
	// digits and underscores only.
	Table string
	// Cap bounds every window count (512 by default, where the 0-10 scales
	// reach 10): counting stops there, which keeps queries cheap for very
	// popular domains and busy IPs.
	Cap int
}

// PostgresHistory is a History in PostgreSQL, shared by every API replica:
// they see the same counts and agree on first-seen dates (kept per tenant,
// address and domain in a separate table updated with LEAST, so concurrent
// first sightings keep the earliest). Every event, first-seen row and
// report carries its tenant. A feedback file is one transaction: its
// reports count from its commit, all at once, or never. Events older than
// the longest window in use can be removed with Prune; first-seen rows and
// reports are kept.
type PostgresHistory struct {
	db                     PgDB
	table                  string // unquoted name, validated
	events, first, reports string // quoted identifiers
	marks, counts          string
	cap                    int
	statsSQL               string
	recordSQL              string
	commitSQL              string
	withdrawSQL            string
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
		marks:   pgx.Identifier{o.Table + "_report_marks"}.Sanitize(),
		counts:  pgx.Identifier{o.Table + "_report_counts"}.Sanitize(),
		cap:     o.Cap,
	}
	r := h.replacer()
	h.statsSQL = r.Replace(pgStatsSQL)
	h.recordSQL = r.Replace(pgRecordSQL)
	h.commitSQL = r.Replace(pgCommitSQL)
	h.withdrawSQL = r.Replace(pgWithdrawSQL)
	return h, nil
}

func (h *PostgresHistory) replacer() *strings.Replacer {
	f := fnv.New64a()
	f.Write([]byte("emaildata/fraud/" + h.table))
	lock := int64(f.Sum64() >> 1)
	return strings.NewReplacer("{NET}", fmt.Sprint(MaxNetworkTenants), "{E}", h.events, "{F}", h.first, "{R}", h.reports, "{M}", h.marks, "{C}", h.counts,
		"{T}", h.table, "{LOCK}", fmt.Sprint(lock))
}

// Migrate creates the tables and indexes when missing, and brings tables
// of an earlier version up to this one (tenant columns, the report marks
// and counts). Concurrent calls are serialised with an advisory lock.
func (h *PostgresHistory) Migrate(ctx context.Context) error {
	// One Exec without arguments runs as one implicit transaction, so the
	// transaction-scoped advisory lock covers every statement.
	_, err := h.db.Exec(ctx, h.replacer().Replace(pgSchemaSQL))
	if err != nil {
		return fmt.Errorf("fraud: migrate history tables: %w", err)
	}
	return nil
}

// pgSchemaSQL is the schema. Tables of the first version (no tenant
// anywhere) are altered in place: their events, first-seen rows and
// reports get the tenant ” (no tenant asks as ”, so they count for
// nobody: they cannot be told apart by tenant), the indexes that had no
// tenant are replaced, and the first-seen key takes the tenant.
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
ALTER TABLE {E} ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT '';
DROP INDEX IF EXISTS {T}_email_at, {T}_domain_at, {T}_tumbling_at, {T}_ip_at, {T}_phone_at;
CREATE INDEX IF NOT EXISTS {T}_t_email_at ON {E} (tenant, email, at);
CREATE INDEX IF NOT EXISTS {T}_t_domain_at ON {E} (tenant, domain, at) WHERE domain <> '';
CREATE INDEX IF NOT EXISTS {T}_t_tumbling_at ON {E} (tenant, tumbling, at, email) WHERE tumbling <> '';
CREATE INDEX IF NOT EXISTS {T}_t_ip_at ON {E} (tenant, ip, at, email) WHERE ip <> '';
CREATE INDEX IF NOT EXISTS {T}_t_phone_at ON {E} (tenant, phone, at, email) WHERE phone <> '';
CREATE INDEX IF NOT EXISTS {T}_at ON {E} (at);
CREATE INDEX IF NOT EXISTS {T}_email_at_t ON {E} (email, at, tenant);
CREATE TABLE IF NOT EXISTS {F} (
	tenant     text NOT NULL DEFAULT '',
	kind       text NOT NULL,
	key        text NOT NULL,
	first_seen timestamptz NOT NULL,
	last_seen  timestamptz NOT NULL,
	total      bigint NOT NULL,
	CONSTRAINT {T}_seen_pk PRIMARY KEY (tenant, kind, key)
);
ALTER TABLE {F} ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT '';
DO $$
DECLARE c record;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = '{F}'::regclass AND conname = '{T}_seen_pk') THEN
		FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = '{F}'::regclass AND contype = 'p' LOOP
			EXECUTE 'ALTER TABLE {F} DROP CONSTRAINT ' || quote_ident(c.conname);
		END LOOP;
		ALTER TABLE {F} ADD CONSTRAINT {T}_seen_pk PRIMARY KEY (tenant, kind, key);
	END IF;
END $$;
CREATE TABLE IF NOT EXISTS {R} (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at         timestamptz NOT NULL,
	fraud_type text NOT NULL,
	email      text NOT NULL,
	ip         text NOT NULL DEFAULT '',
	phone      text NOT NULL DEFAULT ''
);
ALTER TABLE {R}
	ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS feedback_id text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS line integer NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS reference_id text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS received timestamptz;
DROP INDEX IF EXISTS {T}_reports_email, {T}_reports_ip, {T}_reports_phone;
CREATE INDEX IF NOT EXISTS {T}_reports_list ON {R} (tenant, received, feedback_id, line);
CREATE INDEX IF NOT EXISTS {T}_reports_file ON {R} (tenant, feedback_id, line);
CREATE INDEX IF NOT EXISTS {T}_reports_temail ON {R} (tenant, email);
CREATE TABLE IF NOT EXISTS {M} (
	kind   text NOT NULL,
	key    text NOT NULL,
	tenant text NOT NULL,
	day    integer NOT NULL,
	n      integer NOT NULL,
	PRIMARY KEY (kind, key, tenant, day)
);
CREATE TABLE IF NOT EXISTS {C} (
	tenant text PRIMARY KEY,
	n      bigint NOT NULL
);
`

// pgStatsSQL answers Stats in one round trip. $1 email, $2 domain,
// $3 tumbling, $4 ip, $5 phone, $6 since, $7 now, $8 cap, $9 tenant,
// $10 the first report day counted, $11 the start of the network window.
// The report columns are, per kind,
// the asking tenant's newest report day (NULL: none) and the newest day
// of each other tenant's reports.
const pgStatsSQL = `
SELECT
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE tenant = $9 AND email = $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE tenant = $9 AND domain = $2 AND domain <> '' AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT DISTINCT email FROM {E} WHERE tenant = $9 AND tumbling = $3 AND tumbling <> '' AND email <> $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE tenant = $9 AND ip = $4 AND ip <> '' AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT DISTINCT email FROM {E} WHERE tenant = $9 AND ip = $4 AND ip <> '' AND email <> $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT 1 FROM {E} WHERE tenant = $9 AND phone = $5 AND phone <> '' AND at >= $6 AND at <= $7 LIMIT $8) x),
	(SELECT count(*) FROM (SELECT DISTINCT email FROM {E} WHERE tenant = $9 AND phone = $5 AND phone <> '' AND email <> $1 AND at >= $6 AND at <= $7 LIMIT $8) x),
	e.first_seen, coalesce(e.total, 0), d.first_seen, coalesce(d.total, 0),
	(SELECT count(*) FROM (SELECT DISTINCT tenant FROM {E} WHERE email = $1 AND at >= $11 AND at <= $7 AND tenant <> $9 AND tenant <> '' LIMIT {NET}) x),
	(SELECT max(day) FROM {M} WHERE kind = 'e' AND key = $1 AND tenant = $9 AND day >= $10),
	ARRAY(SELECT max(day) m FROM {M} WHERE kind = 'e' AND key = $1 AND tenant <> $9 AND tenant <> '' AND day >= $10
		GROUP BY tenant ORDER BY m DESC LIMIT {NET}),
	(SELECT max(day) FROM {M} WHERE kind = 'i' AND key = $4 AND $4 <> '' AND tenant = $9 AND day >= $10),
	ARRAY(SELECT max(day) m FROM {M} WHERE kind = 'i' AND key = $4 AND $4 <> '' AND tenant <> $9 AND tenant <> '' AND day >= $10
		GROUP BY tenant ORDER BY m DESC LIMIT {NET}),
	(SELECT max(day) FROM {M} WHERE kind = 'p' AND key = $5 AND $5 <> '' AND tenant = $9 AND day >= $10),
	ARRAY(SELECT max(day) m FROM {M} WHERE kind = 'p' AND key = $5 AND $5 <> '' AND tenant <> $9 AND tenant <> '' AND day >= $10
		GROUP BY tenant ORDER BY m DESC LIMIT {NET})
FROM (SELECT 1) one
LEFT JOIN {F} e ON e.tenant = $9 AND e.kind = 'e' AND e.key = $1
LEFT JOIN {F} d ON d.tenant = $9 AND d.kind = 'd' AND d.key = $2 AND $2 <> ''
`

// pgRecordSQL inserts the event and updates first-seen rows in one
// statement. $1 at, $2 email, $3 domain, $4 tumbling, $5 ip, $6 phone,
// $7 tenant.
const pgRecordSQL = `
WITH ins AS (
	INSERT INTO {E} (at, email, domain, tumbling, ip, phone, tenant) VALUES ($1, $2, $3, $4, $5, $6, $7)
)
INSERT INTO {F} AS f (tenant, kind, key, first_seen, last_seen, total)
SELECT $7, k, v, $1, $1, 1 FROM (VALUES ('e', $2::text), ('d', $3::text)) s(k, v) WHERE v <> ''
ON CONFLICT (tenant, kind, key) DO UPDATE SET
	first_seen = LEAST(f.first_seen, EXCLUDED.first_seen),
	last_seen  = GREATEST(f.last_seen, EXCLUDED.last_seen),
	total      = f.total + 1
`

// Record implements History.
func (h *PostgresHistory) Record(ctx context.Context, ev Event) error {
	_, err := h.db.Exec(ctx, h.recordSQL, ev.At, ev.Email, ev.Domain, ev.Tumbling, ev.IP, ev.Phone, ev.Tenant)
	if err != nil {
		return fmt.Errorf("fraud: record history: %w", err)
	}
	return nil
}

// Stats implements History.
func (h *PostgresHistory) Stats(ctx context.Context, q StatsQuery) (Stats, error) {
	var (
		s                Stats
		eFirst, dFirst   *time.Time
		tumbling         int
		emailN, domainN  int
		ipN, ipD         int
		phoneN, phD      int
		netN             int
		eOwn, iOwn, pOwn *int32
		eNet, iNet, pNet []int32
	)
	from := int32(unixDay(firstDay(q.ReportsSince)))
	err := h.db.QueryRow(ctx, h.statsSQL, q.Email, q.Domain, q.Tumbling, q.IP, q.Phone, q.Now.Add(-q.Window), q.Now, h.cap, q.Tenant, from, q.NetworkSince).
		Scan(&emailN, &domainN, &tumbling, &ipN, &ipD, &phoneN, &phD, &eFirst, &s.EmailTotal, &dFirst, &s.DomainTotal,
			&netN, &eOwn, &eNet, &iOwn, &iNet, &pOwn, &pNet)
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
	s.EmailNetworkTenants = netN
	s.EmailReported, s.IPReported, s.PhoneReported = pgReported(eOwn, eNet), pgReported(iOwn, iNet), pgReported(pOwn, pNet)
	return s, nil
}

func pgReported(own *int32, net []int32) Reported {
	var r Reported
	if own != nil {
		r.Own = dayTime(int64(*own))
	}
	for _, d := range net {
		r.Network = append(r.Network, dayTime(int64(d)))
	}
	return r
}

// pgBatch is one feedback file: a transaction.
type pgBatch struct {
	h              *PostgresHistory
	tx             pgx.Tx
	tenant, id     string
	received       time.Time
	quota, held, n int64
}

// BeginReports implements ReportStore: the file's reports go in one
// transaction, which Commit commits after counting them against the
// quota.
func (h *PostgresHistory) BeginReports(ctx context.Context, tenant, feedbackID string, received time.Time, quota int64) (ReportBatch, error) {
	var held int64
	if err := h.db.QueryRow(ctx, "SELECT coalesce((SELECT n FROM "+h.counts+" WHERE tenant = $1), 0)", tenant).Scan(&held); err != nil {
		return nil, fmt.Errorf("fraud: report count: %w", err)
	}
	if held >= quota {
		return nil, &QuotaError{Quota: quota, Held: held}
	}
	tx, err := h.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("fraud: begin reports: %w", err)
	}
	return &pgBatch{h: h, tx: tx, tenant: tenant, id: feedbackID, received: received, quota: quota, held: held}, nil
}

var pgReportColumns = []string{"tenant", "feedback_id", "line", "at", "fraud_type", "email", "ip", "phone", "reference_id", "received"}

// Add implements ReportBatch: one COPY of the batch into the transaction.
func (b *pgBatch) Add(ctx context.Context, reports []Report) error {
	if b.held+b.n+int64(len(reports)) > b.quota {
		return &QuotaError{Quota: b.quota, Held: b.held, Adds: b.n + int64(len(reports))}
	}
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(reports) {
			return nil, nil
		}
		r := &reports[i]
		i++
		return []any{b.tenant, b.id, int32(r.Line), r.At, r.Type, r.Email, r.IP, r.Phone, r.ReferenceID, b.received}, nil
	})
	if _, err := b.tx.CopyFrom(ctx, pgx.Identifier{b.h.table + "_reports"}, pgReportColumns, src); err != nil {
		return fmt.Errorf("fraud: store reports: %w", err)
	}
	b.n += int64(len(reports))
	return nil
}

// pgCommitSQL counts a file against its tenant's quota and adds its
// reports to the marks, in key order (so that two files of one tenant
// committing at once lock marks in one order). $1 tenant, $2 feedback ID,
// $3 its reports. It returns the tenant's count after the file.
const pgCommitSQL = `
WITH c AS (
	INSERT INTO {C} AS c (tenant, n) VALUES ($1, $3) ON CONFLICT (tenant) DO UPDATE SET n = c.n + EXCLUDED.n RETURNING n
), k AS (
	SELECT kind, key, floor(extract(epoch FROM at) / 86400)::integer AS day FROM {R},
		LATERAL (VALUES ('e', email), ('i', ip), ('p', phone)) v(kind, key)
	WHERE tenant = $1 AND feedback_id = $2 AND key <> ''
), m AS (
	INSERT INTO {M} AS m (kind, key, tenant, day, n)
	SELECT kind, key, $1, day, count(*) FROM k GROUP BY kind, key, day ORDER BY kind, key, day
	ON CONFLICT (kind, key, tenant, day) DO UPDATE SET n = m.n + EXCLUDED.n
)
SELECT n FROM c
`

// Commit implements ReportBatch.
func (b *pgBatch) Commit(ctx context.Context) error {
	if b.n == 0 {
		return b.tx.Rollback(ctx)
	}
	var n int64
	if err := b.tx.QueryRow(ctx, b.h.commitSQL, b.tenant, b.id, b.n).Scan(&n); err != nil {
		_ = b.tx.Rollback(ctx)
		return fmt.Errorf("fraud: commit reports: %w", err)
	}
	if n > b.quota {
		_ = b.tx.Rollback(ctx)
		return &QuotaError{Quota: b.quota, Held: n - b.n, Adds: b.n}
	}
	if err := b.tx.Commit(ctx); err != nil {
		return fmt.Errorf("fraud: commit reports: %w", err)
	}
	return nil
}

// Abort implements ReportBatch.
func (b *pgBatch) Abort(ctx context.Context) error {
	err := b.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

// reportWhere is the condition of tenant's reports matching f, its
// arguments numbered from $1 (the tenant).
func reportWhere(tenant string, f ReportFilter) (string, []any) {
	where, args := "tenant = $1", []any{tenant}
	add := func(cond string, v any) {
		args = append(args, v)
		where += fmt.Sprintf(" AND "+cond, len(args))
	}
	if f.FeedbackID != "" {
		add("feedback_id = $%d", f.FeedbackID)
	}
	if f.Line != 0 {
		add("line = $%d", int32(f.Line))
	}
	if f.Email != "" {
		add("email = $%d", f.Email)
	}
	return where, args
}

// ListReports implements ReportStore.
func (h *PostgresHistory) ListReports(ctx context.Context, tenant string, f ReportFilter, after string, limit int) ([]StoredReport, string, error) {
	cur, err := parseCursor(after)
	if err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", nil
	}
	where, args := reportWhere(tenant, f)
	if cur.set {
		args = append(args, time.UnixMilli(cur.received), cur.id, int32(cur.line))
		where += fmt.Sprintf(" AND (received, feedback_id, line) > ($%d, $%d, $%d)", len(args)-2, len(args)-1, len(args))
	}
	args = append(args, limit+1)
	rows, err := h.db.Query(ctx, "SELECT feedback_id, line, at, fraud_type, email, ip, phone, reference_id, received FROM "+h.reports+
		" WHERE "+where+" AND received IS NOT NULL ORDER BY received, feedback_id, line LIMIT $"+fmt.Sprint(len(args)), args...)
	if err != nil {
		return nil, "", fmt.Errorf("fraud: list reports: %w", err)
	}
	defer rows.Close()
	var out []StoredReport
	for rows.Next() {
		var r StoredReport
		var line int32
		if err := rows.Scan(&r.FeedbackID, &line, &r.At, &r.Type, &r.Email, &r.IP, &r.Phone, &r.ReferenceID, &r.Received); err != nil {
			return nil, "", fmt.Errorf("fraud: list reports: %w", err)
		}
		r.Line, r.At, r.Received = int(line), r.At.UTC(), r.Received.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("fraud: list reports: %w", err)
	}
	if len(out) > limit {
		out = out[:limit]
		return out, cursorOf(&out[limit-1]), nil
	}
	return out, "", nil
}

// pgWithdrawSQL deletes the reports the condition {W} selects and takes
// them off the marks and the tenant's count. $1 is the tenant.
const pgWithdrawSQL = `
WITH d AS (
	DELETE FROM {R} WHERE {W} RETURNING email, ip, phone, floor(extract(epoch FROM at) / 86400)::integer AS day
), agg AS (
	SELECT kind, key, day, count(*)::integer AS c FROM d, LATERAL (VALUES ('e', email), ('i', ip), ('p', phone)) v(kind, key)
	WHERE key <> '' GROUP BY kind, key, day
), upd AS (
	UPDATE {M} m SET n = m.n - agg.c FROM agg
	WHERE m.kind = agg.kind AND m.key = agg.key AND m.tenant = $1 AND m.day = agg.day AND m.n > agg.c
), del AS (
	DELETE FROM {M} m USING agg
	WHERE m.kind = agg.kind AND m.key = agg.key AND m.tenant = $1 AND m.day = agg.day AND m.n <= agg.c
), cnt AS (
	UPDATE {C} SET n = n - (SELECT count(*) FROM d) WHERE tenant = $1
)
SELECT count(*) FROM d
`

// WithdrawReports implements ReportStore: one statement.
func (h *PostgresHistory) WithdrawReports(ctx context.Context, tenant string, f ReportFilter) (int64, error) {
	where, args := reportWhere(tenant, f)
	var n int64
	if err := h.db.QueryRow(ctx, strings.Replace(h.withdrawSQL, "{W}", where, 1), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("fraud: withdraw reports: %w", err)
	}
	return n, nil
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
