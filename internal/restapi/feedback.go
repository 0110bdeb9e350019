package restapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
)

// POST /feedback/v1: fraud feedback. The body is multipart/form-data with
// a part named file: a tab-separated file with a header row naming its
// columns (feedbackColumns), one reported case per row. The file is read
// row by row and recorded in bounded batches (fraud.Feedback) as reports
// of the key's tenant: GET /fr of that tenant for the reported address, IP
// or phone then says so, and other tenants' /fr only once enough tenants
// agree (the network reasons). A row that cannot be used is skipped and
// counted, never failing the file; the file is recorded all at once or, on
// any failure, not at all. Errors are plain text starting "Bad request:"
// (key problems too, as the published API answers them), 413 for a file
// over Config.FeedbackMaxBytes, 429 for a tenant at its report quota or
// with too many files under way, 503 when the server keeps no feedback or
// its store fails.
//
// GET and DELETE /feedback/v1/reports list and withdraw the key's
// tenant's own reports, never another's.

// Feedback file columns. email and fraud_type are required.
const (
	fbEmail       = "email"
	fbFraudType   = "fraud_type"
	fbIP          = "ip"
	fbPhone       = "phone"
	fbCountry     = "country"      // ISO 3166 alpha-2: reads a national-format phone
	fbDate        = "date"         // YYYY-MM-DD or RFC 3339: when the fraud happened
	fbReferenceID = "reference_id" // the client's case or /fr reference, kept with the report
)

var feedbackColumns = []string{fbEmail, fbFraudType, fbIP, fbPhone, fbCountry, fbDate, fbReferenceID}

// DefaultFeedbackMaxBytes is Config.FeedbackMaxBytes when unset.
const DefaultFeedbackMaxBytes = 16 << 20

// Defaults of Config.FeedbackFiles and Config.FeedbackFilesPerTenant.
const (
	DefaultFeedbackFiles          = 4
	DefaultFeedbackFilesPerTenant = 2
)

// maxFeedbackField bounds one value of a feedback row, and
// maxFeedbackLine one row (longer rows are skipped without being held).
const (
	maxFeedbackField = 512
	maxFeedbackLine  = 8 << 10
)

type feedbackAnswer struct {
	Total   int `json:"total_records"`
	Skipped int `json:"skipped_records"`
	// FeedbackID names the recorded file (for listing and withdrawal);
	// absent when no row was recorded.
	FeedbackID string `json:"feedback_id,omitempty"`
}

// badFeedback answers a refused feedback request.
func badFeedback(w http.ResponseWriter, msg string) {
	writeText(w, http.StatusBadRequest, "Bad request: "+msg)
}

// feedbackKey authenticates POST /feedback/v1: the key in the api_key
// query parameter, enabled for fraud; every key problem is a 400.
func (s *Server) feedbackKey(next func(http.ResponseWriter, *http.Request, *apikey.Key)) http.HandlerFunc {
	refuse := func(w http.ResponseWriter, r *http.Request, why refusal, detail string, retry time.Duration) {
		switch why {
		case refuseMalformed:
			badFeedback(w, "Malformed query string: "+detail+".")
		case refuseMissing:
			badFeedback(w, "Missing API key: pass it in the api_key query parameter.")
		case refuseInvalid:
			badFeedback(w, "Invalid API key.")
		case refuseForbidden:
			badFeedback(w, "This API key is not enabled for "+detail+".")
		default: // a spent rate limit: 429, as on every text route
			refuseText(w, r, why, detail, retry)
		}
	}
	authorize := s.needs(services.Fraud, refuse)
	return func(w http.ResponseWriter, r *http.Request) {
		presented := strings.TrimSpace(r.URL.Query().Get("api_key"))
		if k, _, ok := s.authenticate(w, r, presented, refuse, authorize); ok {
			next(w, r, k)
		}
	}
}

// feedbackSlots bounds the feedback files recorded at once, in all and
// per tenant: each holds a store transaction (a database connection) while
// its client sends the file, so that no tenant can take them all.
type feedbackSlots struct {
	mu                  sync.Mutex
	all, max, perTenant int
	tenants             map[string]int
}

func (f *feedbackSlots) take(tenant string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.all >= f.max || f.tenants[tenant] >= f.perTenant {
		return false
	}
	f.all++
	f.tenants[tenant]++
	return true
}

func (f *feedbackSlots) release(tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all--
	if f.tenants[tenant]--; f.tenants[tenant] <= 0 {
		delete(f.tenants, tenant)
	}
}

// feedbackStatus is a failed feedback request's answer.
type feedbackStatus struct {
	code int
	msg  string
}

// fraudFeedback serves POST /feedback/v1.
func (s *Server) fraudFeedback(w http.ResponseWriter, r *http.Request, k *apikey.Key) {
	limit := s.cfg.FeedbackMaxBytes
	if limit <= 0 {
		limit = DefaultFeedbackMaxBytes
	}
	if !s.feedback.take(k.Tenant) {
		w.Header().Set("Retry-After", "5")
		writeText(w, http.StatusTooManyRequests, fmt.Sprintf(
			"Too many feedback files being recorded at once (at most %d per tenant, %d in all); retry when one is done.",
			s.feedback.perTenant, s.feedback.max))
		return
	}
	defer s.feedback.release(k.Tenant)
	ans, st := s.recordFeedback(w, r, k.Tenant, limit)
	switch {
	case st == nil:
		if ans.FeedbackID != "" {
			s.log.Info("fraud feedback recorded", "tenant", k.Tenant, "feedback_id", ans.FeedbackID,
				"records", ans.Total-ans.Skipped, logging.KeyRequestID, requestIDFrom(r.Context()))
		}
		writeJSON(w, http.StatusOK, ans)
	case st.code == http.StatusRequestEntityTooLarge:
		writeText(w, st.code, fmt.Sprintf("File too large: at most %d bytes.", limit))
	case st.code == http.StatusBadRequest:
		badFeedback(w, st.msg)
	case st.code != 0:
		writeText(w, st.code, st.msg)
	}
}

// recordFeedback reads the multipart body and records its file; a nil
// status is success, a zero code an ended request.
func (s *Server) recordFeedback(w http.ResponseWriter, r *http.Request, tenant string, limit int64) (feedbackAnswer, *feedbackStatus) {
	const notMultipart = "send multipart/form-data with the file in a part named file."
	bad := func(msg string) (feedbackAnswer, *feedbackStatus) {
		return feedbackAnswer{}, &feedbackStatus{http.StatusBadRequest, msg}
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return bad(notMultipart)
	}
	// Room for the multipart framing and small other parts.
	most := limit + 64<<10
	if r.ContentLength > most {
		// Refused before a byte of the body is read: a client that sent
		// "Expect: 100-continue" then sends none, and gets the 413
		// instead of a connection reset in the middle of its upload.
		return feedbackAnswer{}, &feedbackStatus{code: http.StatusRequestEntityTooLarge}
	}
	r.Body = http.MaxBytesReader(w, r.Body, most)
	mr, err := r.MultipartReader()
	if err != nil {
		return bad(notMultipart)
	}
	var fb *fraud.Feedback
	defer func() {
		if fb != nil {
			fb.Abort() // nothing after Commit
		}
	}()
	var ans feedbackAnswer
	for {
		part, err := mr.NextPart()
		switch {
		case err == io.EOF && fb != nil:
			return s.commitFeedback(r, tenant, fb, ans)
		case err == io.EOF:
			return bad("the multipart body has no part named file.")
		case err != nil:
			return feedbackAnswer{}, readFailure(err)
		}
		if part.FormName() != "file" {
			if _, err := io.Copy(io.Discard, part); err != nil {
				return feedbackAnswer{}, readFailure(err)
			}
			continue
		}
		if fb != nil {
			return bad("more than one part named file.")
		}
		var st *feedbackStatus
		if fb, ans, st = s.readFeedbackFile(r.Context(), part, tenant, limit); st != nil {
			return feedbackAnswer{}, st
		}
	}
}

// readFailure is the status of a failed body read.
func readFailure(err error) *feedbackStatus {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || errors.Is(err, errFileTooLarge):
		return &feedbackStatus{code: http.StatusRequestEntityTooLarge}
	case isSlowBody(err):
		return &feedbackStatus{http.StatusRequestTimeout, "Request timeout: " + slowBodyMessage(err) + "."}
	}
	return &feedbackStatus{http.StatusBadRequest, "malformed multipart body."}
}

var errFileTooLarge = errors.New("feedback file too large")

// limitedReader reads at most n bytes and fails with errFileTooLarge on
// more.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, errFileTooLarge
	}
	return n, err
}

// readFeedbackFile reads the header and then the rows of the file part,
// adding the accepted ones to a new fraud.Feedback of tenant as it goes.
func (s *Server) readFeedbackFile(ctx context.Context, part *multipart.Part, tenant string, limit int64) (*fraud.Feedback, feedbackAnswer, *feedbackStatus) {
	var ans feedbackAnswer
	br := bufio.NewReaderSize(&limitedReader{r: part, n: limit}, 64<<10)
	header, err := readLine(br)
	if err == errLineTooLong {
		return nil, ans, &feedbackStatus{http.StatusBadRequest, fmt.Sprintf(
			"the first line is longer than %d bytes; it must name the columns (%s).", maxFeedbackLine, strings.Join(feedbackColumns, ", "))}
	}
	if err != nil && err != io.EOF {
		return nil, ans, readFailure(err)
	}
	cols, msg := feedbackHeader(string(bytes.TrimPrefix(header, []byte("\ufeff"))))
	if msg != "" {
		return nil, ans, &feedbackStatus{http.StatusBadRequest, msg}
	}
	fb, err := s.cfg.Fraud.BeginFeedback(ctx, tenant)
	if err != nil {
		return nil, ans, s.storeFailure(ctx, tenant, err)
	}
	ans.FeedbackID = fb.ID()
	for line := 2; err != io.EOF; line++ {
		var row []byte
		row, err = readLine(br)
		switch {
		case err == errLineTooLong:
			ans.Total++
			continue
		case err != nil && err != io.EOF:
			return fb, ans, readFailure(err)
		case len(bytes.TrimSpace(row)) == 0:
			continue
		}
		ans.Total++
		rep, ok := s.feedbackRow(cols, string(row))
		if !ok {
			continue
		}
		rep.Line = line
		if err := fb.Add(ctx, rep); err != nil {
			return fb, ans, s.storeFailure(ctx, tenant, err)
		}
	}
	ans.Skipped = ans.Total - int(fb.Count())
	return fb, ans, nil
}

// commitFeedback makes the file count, or says why it cannot.
func (s *Server) commitFeedback(r *http.Request, tenant string, fb *fraud.Feedback, ans feedbackAnswer) (feedbackAnswer, *feedbackStatus) {
	if fb.Count() == 0 {
		ans.FeedbackID = ""
		return ans, nil
	}
	if err := fb.Commit(r.Context()); err != nil {
		return feedbackAnswer{}, s.storeFailure(r.Context(), tenant, err)
	}
	return ans, nil
}

// storeFailure is the status of a failed BeginFeedback, Add or Commit:
// 429 for the tenant's quota, 503 otherwise (the store is down, or keeps
// no feedback); a zero code when the request itself ended.
func (s *Server) storeFailure(ctx context.Context, tenant string, err error) *feedbackStatus {
	var q *fraud.QuotaError
	switch {
	case errors.As(err, &q):
		return &feedbackStatus{http.StatusTooManyRequests, fmt.Sprintf(
			"Feedback quota reached: this tenant keeps %d reports and may keep %d; this file would add at least %d more. Nothing of it was recorded. Withdraw reports (DELETE /feedback/v1/reports) or ask for a larger quota.",
			q.Held, q.Quota, max(q.Adds, 1))}
	case errors.Is(err, fraud.ErrFeedbackOff):
		return &feedbackStatus{http.StatusServiceUnavailable, feedbackOffMessage}
	case ctx.Err() != nil:
		return &feedbackStatus{}
	}
	s.log.Error("fraud feedback", "tenant", tenant, logging.KeyRequestID, requestIDFrom(ctx), logging.KeyError, err.Error())
	return &feedbackStatus{http.StatusServiceUnavailable, "Fraud feedback could not be stored; nothing of the file was recorded. Retry later (quote request id " + requestIDFrom(ctx) + ")."}
}

const feedbackOffMessage = "Fraud feedback is not kept by this server: it has no durable fraud history shared by its replicas (PostgreSQL or the fleet backend); nothing was recorded."

var errLineTooLong = errors.New("feedback row too long")

// readLine returns the next line without its line ending. A line longer
// than maxFeedbackLine is read to its end without being held and yields
// errLineTooLong.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || err == nil && len(line) > maxFeedbackLine {
		for err == bufio.ErrBufferFull {
			_, err = br.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		return nil, errLineTooLong
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	if err == io.EOF && len(line) == 0 {
		return nil, io.EOF
	}
	if len(line) > maxFeedbackLine {
		return nil, errLineTooLong
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// feedbackHeader maps the header's cells to feedbackColumns names.
func feedbackHeader(line string) ([]string, string) {
	if strings.TrimSpace(line) == "" {
		return nil, "the file is empty or its first line is blank; the first line must name the columns (" +
			strings.Join(feedbackColumns, ", ") + ")."
	}
	cols := strings.Split(line, "\t")
	for i, c := range cols {
		c = strings.ToLower(strings.TrimSpace(strings.ToValidUTF8(c, "?")))
		cols[i] = c
		switch {
		case !slices.Contains(feedbackColumns, c):
			return nil, fmt.Sprintf("Unrecognized column header %q (column %d); the columns are tab-separated, named from: %s.",
				truncate(c, 60), i+1, strings.Join(feedbackColumns, ", "))
		case slices.Contains(cols[:i], c):
			return nil, fmt.Sprintf("Duplicate column header %q (column %d).", c, i+1)
		}
	}
	for _, need := range []string{fbEmail, fbFraudType} {
		if !slices.Contains(cols, need) {
			return nil, fmt.Sprintf("Missing column header %q; %s and %s are required.", need, fbEmail, fbFraudType)
		}
	}
	return cols, ""
}

// feedbackRow checks one row; false when it is skipped.
func (s *Server) feedbackRow(cols []string, line string) (fraud.Report, bool) {
	fields := strings.Split(line, "\t")
	if len(fields) != len(cols) {
		return fraud.Report{}, false
	}
	var in fraud.ReportInput
	ref := ""
	for i, c := range cols {
		v := strings.TrimSpace(fields[i])
		if len(v) > maxFeedbackField || !utf8.ValidString(v) {
			return fraud.Report{}, false
		}
		switch c {
		case fbEmail:
			in.Email = v
		case fbFraudType:
			in.Type = v
		case fbIP:
			in.IP = v
		case fbPhone:
			in.Phone = v
		case fbCountry:
			in.Country = v
		case fbReferenceID:
			ref = v
		case fbDate:
			if v == "" {
				continue
			}
			t, ok := parseFeedbackDate(v)
			if !ok {
				return fraud.Report{}, false
			}
			in.At = t
		}
	}
	rep, err := s.cfg.Fraud.ReportOf(in)
	if err != nil {
		return fraud.Report{}, false
	}
	if len(ref) > fraud.MaxReferenceID {
		return fraud.Report{}, false
	}
	rep.ReferenceID = ref
	return rep, true
}

func parseFeedbackDate(v string) (time.Time, bool) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// Listing and withdrawal: GET and DELETE /feedback/v1/reports.

// Page sizes of GET /feedback/v1/reports.
const (
	defaultReportsLimit = 100
	maxReportsLimit     = 1000
)

type reportItem struct {
	FeedbackID  string `json:"feedback_id"`
	Line        int    `json:"line"`
	FraudType   string `json:"fraud_type"`
	Date        string `json:"date"`
	ReceivedAt  string `json:"received_at"`
	ReferenceID string `json:"reference_id,omitempty"`
	HasIP       bool   `json:"has_ip"`
	HasPhone    bool   `json:"has_phone"`
}

type reportsAnswer struct {
	Reports []reportItem `json:"reports"`
	// Next is the after value of the next page; absent on the last.
	Next string `json:"next,omitempty"`
}

// reportFilter reads feedback_id, line and email; msg says what is wrong.
func (s *Server) reportFilter(q url.Values) (fraud.ReportFilter, string) {
	line := 0
	if v := q.Get("line"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			return fraud.ReportFilter{}, "line must be a line number of a feedback file (2 or more; line 1 is the header)."
		}
		line = n
	}
	id := q.Get("feedback_id")
	if id != "" && !fraud.ValidFeedbackID(id) {
		return fraud.ReportFilter{}, "feedback_id is not one POST /feedback/v1 returns (fb_ and 24 hex digits)."
	}
	f, err := s.cfg.Fraud.ReportFilter(id, line, q.Get("email"))
	var re *fraud.ReportError
	if errors.As(err, &re) && re.Field == "line" {
		return fraud.ReportFilter{}, "line needs feedback_id."
	}
	if err != nil {
		return fraud.ReportFilter{}, "email is not an email address."
	}
	return f, ""
}

// listReports serves GET /feedback/v1/reports: the key's tenant's reports.
func (s *Server) listReports(w http.ResponseWriter, r *http.Request, k *apikey.Key, q url.Values) {
	f, msg := s.reportFilter(q)
	if msg != "" {
		badFeedback(w, msg)
		return
	}
	limit := defaultReportsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxReportsLimit {
			badFeedback(w, fmt.Sprintf("limit must be 1 to %d.", maxReportsLimit))
			return
		}
		limit = n
	}
	reports, next, err := s.cfg.Fraud.ListReports(r.Context(), k.Tenant, f, q.Get("after"), limit)
	if errors.Is(err, fraud.ErrBadCursor) {
		badFeedback(w, "after is not the next value of an earlier page.")
		return
	}
	if err != nil {
		s.reportsFailure(w, r, k.Tenant, err)
		return
	}
	ans := reportsAnswer{Reports: make([]reportItem, 0, len(reports)), Next: next}
	for _, rep := range reports {
		ans.Reports = append(ans.Reports, reportItem{
			FeedbackID: rep.FeedbackID, Line: rep.Line, FraudType: rep.Type, Date: rep.At.UTC().Format(time.DateOnly),
			ReceivedAt: rep.Received.UTC().Format(time.RFC3339), ReferenceID: rep.ReferenceID,
			HasIP: rep.IP != "", HasPhone: rep.Phone != "",
		})
	}
	writeJSON(w, http.StatusOK, ans)
}

// withdrawReports serves DELETE /feedback/v1/reports: the key's tenant's
// reports of one file, one line of it, or one address stop counting.
func (s *Server) withdrawReports(w http.ResponseWriter, r *http.Request, k *apikey.Key, q url.Values) {
	f, msg := s.reportFilter(q)
	if msg == "" && f.FeedbackID == "" && f.Email == "" {
		msg = "name the reports to withdraw: feedback_id (a whole file, or one line of it with line) or email (every report of the address)."
	}
	if msg != "" {
		badFeedback(w, msg)
		return
	}
	n, err := s.cfg.Fraud.WithdrawReports(r.Context(), k.Tenant, f)
	if err != nil {
		s.reportsFailure(w, r, k.Tenant, err)
		return
	}
	s.log.Info("fraud reports withdrawn", "tenant", k.Tenant, "feedback_id", f.FeedbackID, "line", f.Line,
		"by_email", f.Email != "", "withdrawn", n, logging.KeyRequestID, requestIDFrom(r.Context()))
	writeJSON(w, http.StatusOK, map[string]int64{"withdrawn": n})
}

func (s *Server) reportsFailure(w http.ResponseWriter, r *http.Request, tenant string, err error) {
	if st := s.storeFailure(r.Context(), tenant, err); st.code != 0 {
		writeText(w, st.code, st.msg)
	}
}

// anyParams is a textKey check that needs no parameter but the key.
func anyParams(url.Values) bool { return true }
