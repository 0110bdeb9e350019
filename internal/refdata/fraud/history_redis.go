package fraud

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions configure a RedisHistory.
type RedisOptions struct {
	// Prefix starts every key ("emaildata:" by default; "fraud:" follows
	// it), as the fleet backend's URL sets it.
	Prefix string
	// Retain is how long query events are kept for the window counts
	// (7 days by default): velocity windows longer than it see only it.
	Retain time.Duration
	// SeenTTL is how long first-seen dates outlive an identifier's last
	// query (400 days by default, past the longest longevity step).
	SeenTTL time.Duration
	// MaxPerKey bounds the events and addresses kept per identifier (256
	// by default; the 0-10 scales saturate at 512 events).
	MaxPerKey int
}

// RedisHistory is a History on a Redis server (the fleet backend), shared
// by every API replica. Queries are kept per tenant, with TTLs, so memory
// follows traffic; reports are kept until withdrawn, bounded per tenant by
// the quota. A feedback file is staged: its reports and marks are written
// under its ID, which counts only once Commit (one script, checking the
// quota) puts it in the set of live files, so a failed file never counts;
// what it staged is deleted by Abort, and otherwise expires or is swept by
// a later BeginReports. It needs one Redis server (not a cluster): its
// scripts touch keys they compute.
type RedisHistory struct {
	rdb *redis.Client
	p   string // key prefix, ending "fraud:"
	o   RedisOptions
}

// NewRedisHistory returns a history on rdb.
func NewRedisHistory(rdb *redis.Client, o RedisOptions) *RedisHistory {
	if o.Prefix == "" {
		o.Prefix = "emaildata:"
	}
	if o.Retain <= 0 {
		o.Retain = 7 * 24 * time.Hour
	}
	if o.SeenTTL <= 0 {
		o.SeenTTL = 400 * 24 * time.Hour
	}
	if o.MaxPerKey <= 0 {
		o.MaxPerKey = 256
	}
	return &RedisHistory{rdb: rdb, p: o.Prefix + "fraud:", o: o}
}

// Staged feedback files expire after stagingTTL; a BeginReports sweeps
// those staged longer than sweepAfter (an upload that old has failed).
const (
	stagingTTL = 24 * time.Hour
	sweepAfter = 6 * time.Hour
	// chunkLines reports of a file share one hash field.
	chunkLines = 128
)

// tenantToken names a tenant in keys: short, and free of separators.
func tenantToken(tenant string) string {
	sum := sha256.Sum256([]byte("emaildata-fraud-tenant\x00" + tenant))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

func (h *RedisHistory) key(parts ...string) string { return h.p + strings.Join(parts, ":") }

// queryKeys are KEYS[1..10] of the record and stats scripts: event counts
// of email, domain, ip, phone; addresses by tumbling key, ip, phone;
// first-seen of email and domain ("" for a missing identifier); the
// tenants that asked about the email.
func (h *RedisHistory) queryKeys(tenant string, k Keys) []string {
	tk := tenantToken(tenant)
	at := func(kind, id string) string {
		if id == "" {
			return ""
		}
		return h.key(kind, tk, id)
	}
	return []string{
		at("q:e", k.Email), at("q:d", k.Domain), at("q:i", k.IP), at("q:p", k.Phone),
		at("qm:t", k.Tumbling), at("qm:i", k.IP), at("qm:p", k.Phone),
		at("qf:e", k.Email), at("qf:d", k.Domain), h.emailTenants(k.Email),
	}
}

// emailTenants keys the tenants that asked about an email, by last time.
func (h *RedisHistory) emailTenants(email string) string {
	if email == "" {
		return ""
	}
	return h.key("qn:e", email)
}

var redisRecord = redis.NewScript(`
local at, id, email, cutoff = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local retain, cap, seen, tk = ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8]
local function trim(k)
	redis.call('ZREMRANGEBYSCORE', k, '-inf', '(' .. cutoff)
	redis.call('ZREMRANGEBYRANK', k, 0, -(cap + 1))
	redis.call('PEXPIRE', k, retain)
end
for i = 1, 4 do
	if KEYS[i] ~= '' then
		redis.call('ZADD', KEYS[i], at, id)
		trim(KEYS[i])
	end
end
for i = 5, 7 do
	if KEYS[i] ~= '' and email ~= '' then
		redis.call('ZADD', KEYS[i], 'GT', at, email)
		trim(KEYS[i])
	end
end
for i = 8, 9 do
	if KEYS[i] ~= '' then
		local f = redis.call('HGET', KEYS[i], 'f')
		if not f or tonumber(f) > tonumber(at) then
			redis.call('HSET', KEYS[i], 'f', at)
		end
		redis.call('HINCRBY', KEYS[i], 't', 1)
		redis.call('PEXPIRE', KEYS[i], seen)
	end
end
if KEYS[10] ~= '' and tk ~= '' then
	redis.call('ZADD', KEYS[10], 'GT', at, tk)
	trim(KEYS[10])
end
return 1
`)

// Record implements History.
func (h *RedisHistory) Record(ctx context.Context, ev Event) error {
	var id [6]byte
	_, _ = rand.Read(id[:])
	at := ev.At.UnixMilli()
	tk := ""
	if ev.Tenant != "" {
		tk = tenantToken(ev.Tenant)
	}
	err := redisRecord.Run(ctx, h.rdb, h.queryKeys(ev.Tenant, ev.Keys),
		at, fmt.Sprintf("%d-%x", at, id), ev.Email, at-h.o.Retain.Milliseconds(),
		h.o.Retain.Milliseconds(), h.o.MaxPerKey, h.o.SeenTTL.Milliseconds(), tk).Err()
	if err != nil {
		return fmt.Errorf("fraud: record history: %w", err)
	}
	return nil
}

var redisStats = redis.NewScript(`
local since, now, email, from, nsince, tk = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local function count(k)
	if k == '' then return 0 end
	return redis.call('ZCOUNT', k, since, now)
end
local function others(k)
	if k == '' then return 0 end
	local n = redis.call('ZCOUNT', k, since, now)
	local s = redis.call('ZSCORE', k, email)
	if s and tonumber(s) >= tonumber(since) and tonumber(s) <= tonumber(now) then n = n - 1 end
	return n
end
local function first(k)
	if k == '' then return {'', '0'} end
	local v = redis.call('HMGET', k, 'f', 't')
	return {v[1] or '', v[2] or '0'}
end
local live = {}
local function marks(k)
	local r = {}
	if k == '' then return r end
	local all = redis.call('HGETALL', k)
	for i = 1, #all, 2 do
		local tk, fid, day = string.match(all[i], '^([^|]*)|([^|]*)|(%d+)$')
		if day and tonumber(day) >= from then
			if live[fid] == nil then live[fid] = redis.call('SISMEMBER', KEYS[14], fid) == 1 end
			if live[fid] then table.insert(r, tk .. '|' .. day) end
		end
	end
	return r
end
local e, d = first(KEYS[8]), first(KEYS[9])
local net = 0
if KEYS[10] ~= '' then
	net = redis.call('ZCOUNT', KEYS[10], nsince, now)
	local s = redis.call('ZSCORE', KEYS[10], tk)
	if s and tonumber(s) >= tonumber(nsince) and tonumber(s) <= tonumber(now) then net = net - 1 end
end
return {count(KEYS[1]), count(KEYS[2]), others(KEYS[5]), count(KEYS[3]), others(KEYS[6]), count(KEYS[4]), others(KEYS[7]),
	e[1], e[2], d[1], d[2], marks(KEYS[11]), marks(KEYS[12]), marks(KEYS[13]), net}
`)

// Stats implements History: one script.
func (h *RedisHistory) Stats(ctx context.Context, q StatsQuery) (Stats, error) {
	mark := func(kind, id string) string {
		if id == "" {
			return ""
		}
		return h.key("m", kind, id)
	}
	keys := append(h.queryKeys(q.Tenant, q.Keys), mark("e", q.Email), mark("i", q.IP), mark("p", q.Phone), h.key("live"))
	own := tenantToken(q.Tenant)
	v, err := redisStats.Run(ctx, h.rdb, keys, q.Now.Add(-q.Window).UnixMilli(), q.Now.UnixMilli(), q.Email,
		unixDay(firstDay(q.ReportsSince)), q.NetworkSince.UnixMilli(), own).Slice()
	if err != nil || len(v) != 15 {
		return Stats{}, fmt.Errorf("fraud: history stats: %w", cmpErr(err, "a short answer"))
	}
	n := func(i int) int64 {
		switch x := v[i].(type) {
		case int64:
			return x
		case string:
			y, _ := strconv.ParseInt(x, 10, 64)
			return y
		}
		return 0
	}
	ms := func(i int) time.Time {
		if s, _ := v[i].(string); s != "" {
			return time.UnixMilli(n(i)).UTC()
		}
		return time.Time{}
	}
	s := Stats{
		EmailCount: int(n(0)), DomainCount: int(n(1)), TumblingVariants: int(n(2)),
		IPCount: int(n(3)), IPDistinctEmails: int(n(4)), PhoneCount: int(n(5)), PhoneDistinctEmails: int(n(6)),
		EmailFirstSeen: ms(7), EmailTotal: n(8), DomainFirstSeen: ms(9), DomainTotal: n(10),
		EmailNetworkTenants: int(min(n(14), MaxNetworkTenants)),
	}
	for i, dst := range []*Reported{&s.EmailReported, &s.IPReported, &s.PhoneReported} {
		items, _ := v[11+i].([]any)
		newest := map[string]int64{}
		for _, it := range items {
			tk, day, _ := strings.Cut(fmt.Sprint(it), "|")
			if d, err := strconv.ParseInt(day, 10, 64); err == nil && d > newest[tk] {
				newest[tk] = d
			}
		}
		*dst = splitReported(newest, own)
	}
	return s, nil
}

func cmpErr(err error, otherwise string) error {
	if err != nil {
		return err
	}
	return errors.New(otherwise)
}

// redisBatch stages one feedback file.
type redisBatch struct {
	h              *RedisHistory
	tenant, tk, id string
	received       time.Time
	quota, held, n int64
	recs           []any
}

// BeginReports implements ReportStore. It first sweeps files staged long
// ago (their uploads died with a process).
func (h *RedisHistory) BeginReports(ctx context.Context, tenant, feedbackID string, received time.Time, quota int64) (ReportBatch, error) {
	if err := h.sweep(ctx, received); err != nil {
		return nil, err
	}
	tk := tenantToken(tenant)
	held, err := h.rdb.Get(ctx, h.key("n", tk)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("fraud: report count: %w", err)
	}
	if held >= quota {
		return nil, &QuotaError{Quota: quota, Held: held}
	}
	return &redisBatch{h: h, tenant: tenant, tk: tk, id: feedbackID, received: received, quota: quota, held: held}, nil
}

// A record is "line\x1fday\x1ftype\x1femail\x1fip\x1fphone\x1freference",
// and each ends with \x1e in its chunk (control characters are taken out
// of reference IDs).
var redisAdd = redis.NewScript(`
local fid, tk, ttl, mp = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], fid)
redis.call('HSET', KEYS[3], 'tk', tk)
local chunks, order = {}, {}
for i = 6, #ARGV do
	local rec = ARGV[i]
	local line, day, typ, email, ip, phone = string.match(rec, '^(%d+)\31(%d+)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31')
	local c = tostring(math.floor(tonumber(line) / ` + strconv.Itoa(chunkLines) + `))
	if not chunks[c] then chunks[c] = {}; table.insert(order, c) end
	table.insert(chunks[c], rec .. '\30')
	local field = tk .. '|' .. fid .. '|' .. day
	if email ~= '' then redis.call('HINCRBY', mp .. 'e:' .. email, field, 1) end
	if ip ~= '' then redis.call('HINCRBY', mp .. 'i:' .. ip, field, 1) end
	if phone ~= '' then redis.call('HINCRBY', mp .. 'p:' .. phone, field, 1) end
end
for _, c in ipairs(order) do
	local old = redis.call('HGET', KEYS[1], c) or ''
	redis.call('HSET', KEYS[1], c, old .. table.concat(chunks[c]))
end
redis.call('HINCRBY', KEYS[3], 'n', #ARGV - 5)
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
return 1
`)

func encodeRecord(r *Report) string {
	ref := strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return -1
		}
		return c
	}, r.ReferenceID)
	return strings.Join([]string{strconv.Itoa(r.Line), strconv.FormatInt(unixDay(r.At), 10), r.Type, r.Email, r.IP, r.Phone, ref}, "\x1f")
}

func decodeRecord(s string) (Report, bool) {
	f := strings.Split(s, "\x1f")
	if len(f) != 7 {
		return Report{}, false
	}
	line, err1 := strconv.Atoi(f[0])
	day, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return Report{}, false
	}
	return Report{Keys: Keys{Email: f[3], IP: f[4], Phone: f[5]}, Type: f[2], At: dayTime(day), Line: line, ReferenceID: f[6]}, true
}

// Add implements ReportBatch: one script per batch.
func (b *redisBatch) Add(ctx context.Context, reports []Report) error {
	if b.held+b.n+int64(len(reports)) > b.quota {
		return &QuotaError{Quota: b.quota, Held: b.held, Adds: b.n + int64(len(reports))}
	}
	h := b.h
	b.recs = append(b.recs[:0], b.id, b.tk, b.received.UnixMilli(), int64(stagingTTL/time.Second), h.key("m")+":")
	for i := range reports {
		b.recs = append(b.recs, encodeRecord(&reports[i]))
	}
	keys := []string{h.key("r", b.id), h.key("stage"), h.key("fm", b.id)}
	if err := redisAdd.Run(ctx, h.rdb, keys, b.recs...).Err(); err != nil {
		return fmt.Errorf("fraud: store reports: %w", err)
	}
	b.n += int64(len(reports))
	return nil
}

var redisCommit = redis.NewScript(`
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[2])
if held + n > tonumber(ARGV[3]) then return {0, held} end
redis.call('INCRBY', KEYS[1], n)
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('PERSIST', KEYS[5])
redis.call('PERSIST', KEYS[6])
redis.call('HSET', KEYS[6], 'received', ARGV[4], 'n', n)
redis.call('HSET', KEYS[7], ARGV[5], ARGV[6])
return {1, held}
`)

// Commit implements ReportBatch: one script makes the file live.
func (b *redisBatch) Commit(ctx context.Context) error {
	if b.n == 0 {
		return nil
	}
	h := b.h
	keys := []string{h.key("n", b.tk), h.key("f", b.tk), h.key("live"), h.key("stage"), h.key("r", b.id), h.key("fm", b.id), h.key("tenants")}
	v, err := redisCommit.Run(ctx, h.rdb, keys, b.id, b.n, b.quota, b.received.UnixMilli(), b.tk, b.tenant).Int64Slice()
	if err != nil || len(v) != 2 {
		return fmt.Errorf("fraud: commit reports: %w", cmpErr(err, "a short answer"))
	}
	if v[0] != 1 {
		return &QuotaError{Quota: b.quota, Held: v[1], Adds: b.n}
	}
	b.n = 0 // committed: Abort leaves it alone
	return nil
}

// Abort implements ReportBatch: it deletes what the file staged.
func (b *redisBatch) Abort(ctx context.Context) error {
	if b.n == 0 {
		return nil
	}
	return b.h.drop(ctx, b.id, b.tk)
}

// drop deletes a file that is not live (staged, aborted or withdrawn
// whole): the marks its records made, then the records. It can run again
// after an interruption.
func (h *RedisHistory) drop(ctx context.Context, fid, tk string) error {
	rk := h.key("r", fid)
	chunks, err := h.rdb.HKeys(ctx, rk).Result()
	if err != nil {
		return fmt.Errorf("fraud: drop reports: %w", err)
	}
	for _, c := range chunks {
		v, err := h.rdb.HGet(ctx, rk, c).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("fraud: drop reports: %w", err)
		}
		pipe := h.rdb.Pipeline()
		for _, rec := range strings.Split(strings.TrimSuffix(v, "\x1e"), "\x1e") {
			r, ok := decodeRecord(rec)
			if !ok {
				continue
			}
			field := tk + "|" + fid + "|" + strconv.FormatInt(unixDay(r.At), 10)
			for _, m := range [][2]string{{"e", r.Email}, {"i", r.IP}, {"p", r.Phone}} {
				if m[1] != "" {
					pipe.HDel(ctx, h.key("m", m[0], m[1]), field)
				}
			}
		}
		pipe.HDel(ctx, rk, c)
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("fraud: drop reports: %w", err)
		}
	}
	if err := h.rdb.Del(ctx, rk, h.key("fm", fid)).Err(); err != nil {
		return fmt.Errorf("fraud: drop reports: %w", err)
	}
	return h.rdb.ZRem(ctx, h.key("stage"), fid).Err()
}

// sweep drops files staged before now-sweepAfter.
func (h *RedisHistory) sweep(ctx context.Context, now time.Time) error {
	stale, err := h.rdb.ZRangeByScore(ctx, h.key("stage"), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.Add(-sweepAfter).UnixMilli(), 10), Count: 4}).Result()
	if err != nil {
		return fmt.Errorf("fraud: sweep staged reports: %w", err)
	}
	for _, fid := range stale {
		tk, err := h.rdb.HGet(ctx, h.key("fm", fid), "tk").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("fraud: sweep staged reports: %w", err)
		}
		if live, _ := h.rdb.SIsMember(ctx, h.key("live"), fid).Result(); live {
			h.rdb.ZRem(ctx, h.key("stage"), fid)
			continue
		}
		if err := h.drop(ctx, fid, tk); err != nil {
			return err
		}
	}
	return nil
}

// files returns tenant's live files in listing order (received, ID), from
// the cursor's file on, as (ID, received ms).
func (h *RedisHistory) files(ctx context.Context, tk string, cur reportCursor, f ReportFilter) ([]redis.Z, error) {
	fk := h.key("f", tk)
	if f.FeedbackID != "" {
		score, err := h.rdb.ZScore(ctx, fk, f.FeedbackID).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []redis.Z{{Score: score, Member: f.FeedbackID}}, nil
	}
	min := "-inf"
	if cur.set {
		min = strconv.FormatInt(cur.received, 10)
	}
	zs, err := h.rdb.ZRangeByScoreWithScores(ctx, fk, &redis.ZRangeBy{Min: min, Max: "+inf"}).Result()
	if err != nil || f.Email == "" {
		return zs, err
	}
	// Only the files whose marks name the address.
	marks, err := h.rdb.HKeys(ctx, h.key("m", "e", f.Email)).Result()
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, m := range marks {
		if t, rest, ok := strings.Cut(m, "|"); ok && t == tk {
			fid, _, _ := strings.Cut(rest, "|")
			has[fid] = true
		}
	}
	return slices.DeleteFunc(zs, func(z redis.Z) bool { return !has[z.Member.(string)] }), nil
}

// scan calls fn with tenant's reports matching f after the cursor, file by
// file and chunk by chunk, until fn returns false.
func (h *RedisHistory) scan(ctx context.Context, tenant string, f ReportFilter, cur reportCursor,
	fn func(fid string, chunk string, recs []StoredReport) bool) error {
	tk := tenantToken(tenant)
	files, err := h.files(ctx, tk, cur, f)
	if err != nil {
		return fmt.Errorf("fraud: reports: %w", err)
	}
	for _, z := range files {
		fid := z.Member.(string)
		received := time.UnixMilli(int64(z.Score)).UTC()
		if cur.set && (int64(z.Score) < cur.received || int64(z.Score) == cur.received && fid < cur.id) {
			continue
		}
		rk := h.key("r", fid)
		var chunks []int
		if f.Line != 0 {
			chunks = []int{f.Line / chunkLines}
		} else {
			names, err := h.rdb.HKeys(ctx, rk).Result()
			if err != nil {
				return fmt.Errorf("fraud: reports: %w", err)
			}
			for _, n := range names {
				if c, err := strconv.Atoi(n); err == nil {
					chunks = append(chunks, c)
				}
			}
			slices.Sort(chunks)
		}
		for _, c := range chunks {
			name := strconv.Itoa(c)
			v, err := h.rdb.HGet(ctx, rk, name).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("fraud: reports: %w", err)
			}
			var recs []StoredReport
			for _, rec := range strings.Split(strings.TrimSuffix(v, "\x1e"), "\x1e") {
				r, ok := decodeRecord(rec)
				sr := StoredReport{Report: r, FeedbackID: fid, Received: received}
				if ok && cur.before(&sr) && f.match(&sr) {
					recs = append(recs, sr)
				}
			}
			if len(recs) > 0 && !fn(fid, name, recs) {
				return nil
			}
		}
	}
	return nil
}

// ListReports implements ReportStore.
func (h *RedisHistory) ListReports(ctx context.Context, tenant string, f ReportFilter, after string, limit int) ([]StoredReport, string, error) {
	cur, err := parseCursor(after)
	if err != nil || limit <= 0 {
		return nil, "", err
	}
	var out []StoredReport
	more := false
	err = h.scan(ctx, tenant, f, cur, func(_, _ string, recs []StoredReport) bool {
		for _, r := range recs {
			if len(out) == limit {
				more = true
				return false
			}
			out = append(out, r)
		}
		return true
	})
	if err != nil {
		return nil, "", err
	}
	if more {
		return out, cursorOf(&out[len(out)-1]), nil
	}
	return out, "", nil
}

var redisWithdrawFile = redis.NewScript(`
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local n = tonumber(redis.call('HGET', KEYS[4], 'n') or '0')
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('DECRBY', KEYS[3], n)
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[4], ARGV[3])
redis.call('EXPIRE', KEYS[6], ARGV[3])
return n
`)

// redisWithdrawLines takes lines out of one chunk of a live file, and
// their reports off the marks and the counts; a file left empty is
// deleted.
var redisWithdrawLines = redis.NewScript(`
local chunk, tk, fid, mp = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local drop = {}
for i = 5, #ARGV do drop[ARGV[i]] = true end
local v = redis.call('HGET', KEYS[1], chunk)
if not v then return 0 end
local keep, n = {}, 0
for rec in string.gmatch(v, '([^\30]*)\30') do
	local line, day, typ, email, ip, phone = string.match(rec, '^(%d+)\31(%d+)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31')
	if line and drop[line] then
		n = n + 1
		local field = tk .. '|' .. fid .. '|' .. day
		for _, m in ipairs({{'e:', email}, {'i:', ip}, {'p:', phone}}) do
			if m[2] ~= '' then
				local k = mp .. m[1] .. m[2]
				if redis.call('HINCRBY', k, field, -1) <= 0 then redis.call('HDEL', k, field) end
			end
		end
	else
		table.insert(keep, rec .. '\30')
	end
end
if n == 0 then return 0 end
if #keep == 0 then redis.call('HDEL', KEYS[1], chunk) else redis.call('HSET', KEYS[1], chunk, table.concat(keep)) end
redis.call('DECRBY', KEYS[3], n)
if redis.call('HINCRBY', KEYS[2], 'n', -n) <= 0 then
	redis.call('DEL', KEYS[1], KEYS[2])
	redis.call('ZREM', KEYS[4], fid)
	redis.call('SREM', KEYS[5], fid)
end
return n
`)

// WithdrawReports implements ReportStore. A whole file stops counting in
// one script and is then deleted; single reports are taken out chunk by
// chunk, each chunk in one script.
func (h *RedisHistory) WithdrawReports(ctx context.Context, tenant string, f ReportFilter) (int64, error) {
	tk := tenantToken(tenant)
	if f.FeedbackID != "" && f.Line == 0 && f.Email == "" {
		keys := []string{h.key("f", tk), h.key("live"), h.key("n", tk), h.key("fm", f.FeedbackID), h.key("stage"), h.key("r", f.FeedbackID)}
		n, err := redisWithdrawFile.Run(ctx, h.rdb, keys, f.FeedbackID, time.Now().UnixMilli(), int64(stagingTTL/time.Second)).Int64()
		if err != nil {
			return 0, fmt.Errorf("fraud: withdraw reports: %w", err)
		}
		if n > 0 {
			// Already uncounted; what is left is swept if this stops.
			if err := h.drop(ctx, f.FeedbackID, tk); err != nil {
				return n, err
			}
		}
		return n, nil
	}
	var total int64
	var runErr error
	err := h.scan(ctx, tenant, f, reportCursor{}, func(fid, chunk string, recs []StoredReport) bool {
		args := []any{chunk, tk, fid, h.key("m") + ":"}
		for _, r := range recs {
			args = append(args, strconv.Itoa(r.Line))
		}
		keys := []string{h.key("r", fid), h.key("fm", fid), h.key("n", tk), h.key("f", tk), h.key("live")}
		n, err := redisWithdrawLines.Run(ctx, h.rdb, keys, args...).Int64()
		if err != nil {
			runErr = fmt.Errorf("fraud: withdraw reports: %w", err)
			return false
		}
		total += n
		return true
	})
	return total, errors.Join(err, runErr)
}
