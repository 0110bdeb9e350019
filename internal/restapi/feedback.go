package restapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
)

// POST /feedback/v1: fraud feedback. The body is multipart/form-data with
// a part named file: a tab-separated file with a header row naming its
// columns (feedbackColumns), one reported case per row. Each accepted row
// is recorded in the fraud History (fraud.Scorer.Record), so that GET /fr
// for the reported address, IP or phone says so. A row that cannot be
// used is skipped and counted, never failing the file; the file is
// recorded all at once or, on a server error, not at all. Errors are plain
// text starting "Bad request:" (key problems too, as the published API
// answers them), 413 for a file over Config.FeedbackMaxBytes.

// Feedback file columns. email and fraud_type are required.
const (
	fbEmail       = "email"
	fbFraudType   = "fraud_type"
	fbIP          = "ip"
	fbPhone       = "phone"
	fbCountry     = "country"      // ISO 3166 alpha-2: reads a national-format phone
	fbDate        = "date"         // YYYY-MM-DD or RFC 3339: when the fraud happened
	fbReferenceID = "reference_id" // the client's case or /fr reference; checked, not stored
)

var feedbackColumns = []string{fbEmail, fbFraudType, fbIP, fbPhone, fbCountry, fbDate, fbReferenceID}

// DefaultFeedbackMaxBytes is Config.FeedbackMaxBytes when unset.
const DefaultFeedbackMaxBytes = 16 << 20

// maxFeedbackField bounds one value of a feedback row.
const maxFeedbackField = 512

type feedbackAnswer struct {
	Total   int `json:"total_records"`
	Skipped int `json:"skipped_records"`
}

// badFeedback answers a refused feedback request.
func badFeedback(w http.ResponseWriter, msg string) {
	writeText(w, http.StatusBadRequest, "Bad request: "+msg)
}

// feedbackKey authenticates POST /feedback/v1: the key in the api_key
// query parameter, enabled for fraud; every key problem is a 400.
func (s *Server) feedbackKey(next http.HandlerFunc) http.HandlerFunc {
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
		if _, _, ok := s.authenticate(w, r, presented, refuse, authorize); ok {
			next(w, r)
		}
	}
}

// fraudFeedback serves POST /feedback/v1.
func (s *Server) fraudFeedback(w http.ResponseWriter, r *http.Request) {
	limit := s.cfg.FeedbackMaxBytes
	if limit <= 0 {
		limit = DefaultFeedbackMaxBytes
	}
	file, status, msg := feedbackFile(w, r, limit)
	if status == http.StatusRequestEntityTooLarge {
		writeText(w, status, fmt.Sprintf("File too large: at most %d bytes.", limit))
		return
	}
	if status != 0 {
		badFeedback(w, msg)
		return
	}
	reports, total, msg := s.parseFeedback(file)
	if msg != "" {
		badFeedback(w, msg)
		return
	}
	if err := s.cfg.Fraud.Record(r.Context(), reports); err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "fraud feedback", err)
		return
	}
	writeJSON(w, http.StatusOK, feedbackAnswer{Total: total, Skipped: total - len(reports)})
}

// feedbackFile reads the part named file (at most limit bytes) and checks
// that no other part has that name; status is 0 on success.
func feedbackFile(w http.ResponseWriter, r *http.Request, limit int64) (file []byte, status int, msg string) {
	const notMultipart = "send multipart/form-data with the file in a part named file."
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return nil, http.StatusBadRequest, notMultipart
	}
	// Room for the multipart framing and small other parts.
	body := http.MaxBytesReader(w, r.Body, limit+64<<10)
	r.Body = body
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, http.StatusBadRequest, notMultipart
	}
	found := false
	for {
		part, err := mr.NextPart()
		var tooBig *http.MaxBytesError
		switch {
		case err == io.EOF && found:
			return file, 0, ""
		case err == io.EOF:
			return nil, http.StatusBadRequest, "the multipart body has no part named file."
		case errors.As(err, &tooBig):
			return nil, http.StatusRequestEntityTooLarge, ""
		case err != nil:
			return nil, http.StatusBadRequest, "malformed multipart body."
		}
		if part.FormName() != "file" {
			if _, err := io.Copy(io.Discard, part); errors.As(err, &tooBig) {
				return nil, http.StatusRequestEntityTooLarge, ""
			}
			continue
		}
		if found {
			return nil, http.StatusBadRequest, "more than one part named file."
		}
		found = true
		file, err = io.ReadAll(io.LimitReader(part, limit+1))
		switch {
		case errors.As(err, &tooBig) || int64(len(file)) > limit:
			return nil, http.StatusRequestEntityTooLarge, ""
		case err != nil:
			return nil, http.StatusBadRequest, "malformed multipart body."
		}
	}
}

// parseFeedback reads the header and the rows: the reports of the rows it
// accepts and the number of rows (blank lines aside). msg says why the
// file as a whole is refused.
func (s *Server) parseFeedback(file []byte) (reports []fraud.Report, total int, msg string) {
	file = bytes.TrimPrefix(file, []byte("\ufeff"))
	header, rest, _ := bytes.Cut(file, []byte("\n"))
	cols, msg := feedbackHeader(string(bytes.TrimRight(header, "\r")))
	if msg != "" {
		return nil, 0, msg
	}
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		total++
		if rep, ok := s.feedbackRow(cols, string(line)); ok {
			reports = append(reports, rep)
		}
	}
	return reports, total, ""
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
	return rep, err == nil
}

func parseFeedbackDate(v string) (time.Time, bool) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
