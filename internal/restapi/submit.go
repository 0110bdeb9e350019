package restapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// submitAccepted is the POST /v5/list response.
type submitAccepted struct {
	ListID    int64 `json:"list_id"`
	SizeBytes int64 `json:"size_bytes"`
}

// listParams are the parsed query parameters of a submission.
type listParams struct {
	service     string
	emailColumn int32
	header      bool
	delimiter   listsv1.Delimiter
	action      listsv1.Action
	name        string
	callbackURL string
	maxAge      *time.Duration
	// escapeFormulas escapes the input's cells in the result too.
	escapeFormulas bool
}

// submitList streams the upload to the blob store, then creates the
// EmailList. The list exists only once its file is complete, so an aborted
// upload (or a restart mid-upload) leaves no half-created list.
func (s *Server) submitList(w http.ResponseWriter, r *http.Request) {
	key := keyFrom(r.Context())
	p, status, code, msg := s.parseListParams(r, serviceFrom(r.Context()))
	if status != 0 {
		writeError(w, r, status, code, msg)
		return
	}
	// The file part is bounded by MaxUploadBytes as it streams; this bounds
	// the other parts a multipart body may carry, which are skipped.
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes+maxUploadOverhead)
	up, status, msg := uploadBody(r, s.cfg.MaxUploadBytes)
	body, partName := up.body, up.fileName
	if status != 0 {
		writeError(w, r, status, uploadErrorCode(status), msg)
		return
	}
	if p.name == "" {
		if p.name = uploadName(w, r, partName); p.name == "" {
			return
		}
	}
	blobKey, size, ok := s.storeList(w, r, tenantLabel(key.Tenant), p.name, body)
	if !ok {
		return
	}
	cleanup := func() { _ = s.store.Delete(context.WithoutCancel(r.Context()), blobKey) }
	if status, msg := up.rest(); status != 0 {
		cleanup()
		writeError(w, r, status, uploadErrorCode(status), msg)
		return
	}

	// The ID is reserved for the list's name: the controller adopts the
	// label below only for the list the reservation names (internal/lists/listid).
	id, err := s.ids.Reserve(r.Context(), listName)
	if errors.Is(err, listid.ErrKeyMissing) {
		// A new installation whose manager has not made the key yet (or
		// an installer's own key not provided yet): nothing is lost, the
		// client tries again.
		cleanup()
		s.log.Warn("no list ID until the list ID key Secret exists", logging.KeyError, err.Error())
		w.Header().Set("Retry-After", "10")
		writeError(w, r, http.StatusServiceUnavailable, "ListIDsUnavailable",
			"this server cannot hand out list IDs yet: its installation key is not in place (the operator makes it when it starts); try again shortly")
		return
	}
	if err != nil {
		cleanup()
		s.internalError(w, r, "allocate list id", err)
		return
	}
	list := &listsv1.EmailList{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.cfg.Namespace,
			Name:      listName(id),
			Labels: map[string]string{
				listsv1.ListIDLabel:    strconv.FormatInt(id, 10),
				TenantLabel:            tenantLabel(key.Tenant),
				listsv1.LabelManagedBy: listsv1.ManagedByAPI,
			},
		},
		Spec: listsv1.EmailListSpec{
			Service: listsv1.Service(p.service),
			Action:  p.action,
			Source:  listsv1.ListSource{UploadKey: blobKey},
			Format: listsv1.ListFormat{Name: p.name, EmailColumn: p.emailColumn, Header: &p.header, Delimiter: p.delimiter,
				EscapeFormulas: p.escapeFormulas},
			CallbackURL: p.callbackURL,
		},
	}
	if p.maxAge != nil {
		list.Spec.Verification = &listsv1.VerificationSpec{MaxAge: &metav1.Duration{Duration: *p.maxAge}}
	}
	if err := s.client.Create(context.WithoutCancel(r.Context()), list); err != nil {
		cleanup()
		if rerr := s.ids.Release(context.WithoutCancel(r.Context()), id, list.Name, nil); rerr != nil {
			err = errors.Join(err, rerr)
		}
		s.internalError(w, r, "create list", err)
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/v5/list/%d", id))
	writeJSON(w, http.StatusAccepted, submitAccepted{ListID: id, SizeBytes: size})
}

// listName names the EmailList of list ID id.
func listName(id int64) string { return fmt.Sprintf("list-%d", id) }

// uploadName names a list submitted without a name parameter: the uploaded
// file's own name, else the default. It writes the error and returns "" when
// the file's name is unfit: the name parameter and the file's own name
// follow one rule, listfile.CheckFileName (which refuses, among others,
// control and bidirectional control characters), whose message says what
// is wrong.
func uploadName(w http.ResponseWriter, r *http.Request, partName string) string {
	if partName == "" {
		return "myfile.csv"
	}
	if err := listfile.CheckFileName(partName); err != nil {
		writeError(w, r, http.StatusBadRequest, "BadRequest", fmt.Sprintf("the uploaded file's %v; or pass a name parameter", err))
		return ""
	}
	return partName
}

// storeList streams the upload to the store under the tenant's prefix and
// checks a zip's entries. On failure it writes the error, removes what was
// stored and returns false.
func (s *Server) storeList(w http.ResponseWriter, r *http.Request, tenant, name string, body io.Reader) (string, int64, bool) {
	blobKey := blobstore.UploadPrefix(tenant) + uuid.NewString() + "/" + name
	size, err := s.streamUpload(r.Context(), blobKey, body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, r, http.StatusRequestEntityTooLarge, "FileTooLarge", fmt.Sprintf("the list file is larger than the %d bytes allowed", s.cfg.MaxUploadBytes))
		return "", 0, false
	case errors.Is(err, errEmptyUpload):
		writeError(w, r, http.StatusBadRequest, "EmptyFile", "the list file is empty")
		return "", 0, false
	case isSlowBody(err):
		writeError(w, r, http.StatusRequestTimeout, "SlowUpload", slowBodyMessage(err))
		return "", 0, false
	case err != nil:
		if r.Context().Err() != nil {
			return "", 0, false // the client went away; nothing was created
		}
		if storeFull(err) {
			s.log.Error("store upload: the store is full", logging.KeyRequestID, requestIDFrom(r.Context()), logging.KeyError, err.Error())
			writeError(w, r, http.StatusInsufficientStorage, "InsufficientStorage",
				"the service's store is full: the list was not kept; try again later, or quote request id "+requestIDFrom(r.Context()))
			return "", 0, false
		}
		s.internalError(w, r, "store upload", err)
		return "", 0, false
	}
	if kind, _ := listfile.KindOf(name); kind == listfile.KindZip {
		cleanup := func() { _ = s.store.Delete(context.WithoutCancel(r.Context()), blobKey) }
		if msg, err := s.checkZip(r.Context(), blobKey); err != nil {
			cleanup()
			s.internalError(w, r, "check zip", err)
			return "", 0, false
		} else if msg != "" {
			cleanup()
			writeError(w, r, http.StatusBadRequest, "BadZip", msg)
			return "", 0, false
		}
	}
	return blobKey, size, true
}

// storeFull reports a store out of space (a file store's disk or quota).
// The client is told that, never the path the error names.
func storeFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// parseListParams reads a submission's query; service is the one listService
// authorized.
func (s *Server) parseListParams(r *http.Request, service string) (p listParams, status int, code, msg string) {
	q := r.URL.Query()
	bad := func(m string) (listParams, int, string, string) { return p, http.StatusBadRequest, "BadRequest", m }
	p.service = service

	if v := q.Get("email_column"); v != "" {
		c, err := listfile.ParseColumn(v)
		if err != nil {
			return bad(fmt.Sprintf("email_column %q must be a whole number from 1 to %d", truncate(v, 20), listfile.MaxColumn))
		}
		p.emailColumn = int32(c)
	}
	if v := q.Get("header"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad(fmt.Sprintf("header %q must be true or false", truncate(v, 20)))
		}
		p.header = b
	}
	v := q.Get("delimiter")
	if v == "" || v == "%09" { // the default; a tab encoded twice
		v = listfile.DelimiterName(listfile.DefaultDelimiter)
	}
	b, err := listfile.ParseDelimiter(v)
	if err != nil {
		return bad(fmt.Sprintf("delimiter %q must be a comma, a pipe or a tab (URL-encoded: %%2C, %%7C, %%09)", truncate(v, 20)))
	}
	p.delimiter = listsv1.Delimiter(listfile.DelimiterName(b))
	switch v := q.Get("action"); v {
	case "", "process":
		p.action = ""
	case "report":
		if !services.Purchasable(p.service) {
			return bad(fmt.Sprintf("%s always runs with action=process; action=report is not available for it", p.service))
		}
		p.action = listsv1.ActionReport
	default:
		return bad(fmt.Sprintf("action %q must be process or report", truncate(v, 20)))
	}
	if p.name = q.Get("name"); p.name != "" {
		if err := listfile.CheckFileName(p.name); err != nil {
			return bad(err.Error())
		}
	}
	if v := q.Get("callback_url"); v != "" {
		if err := s.cfg.CallbackPolicy.ValidateURL(v); err != nil {
			return bad(err.Error())
		}
		p.callbackURL = v
	}
	if v := q.Get("escape_formulas"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad(fmt.Sprintf("escape_formulas %q must be true or false", truncate(v, 20)))
		}
		p.escapeFormulas = b
	}
	if v := q.Get("max_age"); v != "" {
		if p.service != services.EmailValidation {
			return bad("max_age applies to email_validation lists only")
		}
		d, err := parseMaxAge(v)
		if err != nil {
			return bad(strings.TrimSuffix(err.Error(), "."))
		}
		p.maxAge = &d
	}
	return p, 0, "", ""
}

func isListService(s string) bool {
	for _, l := range services.List {
		if l == s {
			return true
		}
	}
	return false
}

var errEmptyUpload = errors.New("empty upload")

// An upload is copied to the store through a buffer that starts at
// minUploadBuffer and doubles, up to maxUploadBuffer, while reads fill it.
const (
	minUploadBuffer = 2 << 10
	maxUploadBuffer = 64 << 10
)

// copyUpload copies r to w. A slow upload holds its buffer for as long as
// it lasts, so the buffer grows only with the pace: 1,500 uploads sending a
// byte at a time hold 2 KiB each, a fast one reads 64 KiB at a time.
// (io.Copy would take blob.Writer's ReadFrom, which reads into 1 MiB: 1,500
// slow uploads held 1.5 GiB against the chart's 256 MiB limit.)
func copyUpload(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, minUploadBuffer)
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		switch {
		case err == io.EOF:
			return n, nil
		case err != nil:
			return n, err
		case k == len(buf) && len(buf) < maxUploadBuffer:
			buf = make([]byte, 2*len(buf))
		}
	}
}

// maxUploadOverhead bounds what a multipart body carries beside its file
// part (boundaries, headers, form fields).
const maxUploadOverhead = 1 << 20

// upload is the list file of a submission.
type upload struct {
	body     io.Reader
	fileName string // the multipart part's file name, if any
	// rest reads what follows the file once it is stored: a second part
	// named file is refused rather than silently dropped (one list per
	// submission), as is a body that breaks off.
	rest func() (status int, msg string)
}

func nothingMore() (int, string) { return 0, "" }

// uploadErrorCode is the error code of an upload refused with status.
func uploadErrorCode(status int) string {
	switch status {
	case http.StatusUnsupportedMediaType:
		return "UnsupportedMediaType"
	case http.StatusRequestEntityTooLarge:
		return "FileTooLarge"
	case http.StatusRequestTimeout:
		return "SlowUpload"
	}
	return "BadRequest"
}

// uploadBody finds the list file: a multipart part named file, or the raw
// body for text/csv, text/plain, application/zip and octet-stream uploads.
// maxFile is the file's own limit, for the message of an oversized body.
func uploadBody(r *http.Request, maxFile int64) (up upload, status int, msg string) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil {
		return up, http.StatusUnsupportedMediaType, "send the list as multipart/form-data with a part named file, or as a text/csv body"
	}
	switch mt {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			return up, http.StatusBadRequest, "malformed multipart body: " + err.Error()
		}
		part, status, msg := nextFilePart(mr, maxFile)
		if status != 0 {
			return up, status, msg
		}
		if part == nil {
			return up, http.StatusBadRequest, `the multipart body has no part named "file"`
		}
		return upload{body: part, fileName: part.FileName(), rest: func() (int, string) {
			another, status, msg := nextFilePart(mr, maxFile)
			if another != nil {
				return http.StatusBadRequest, `the multipart body has more than one part named "file"; send one list file per request`
			}
			return status, msg
		}}, 0, ""
	case "text/csv", "text/plain", "application/zip", "application/octet-stream", "text/tab-separated-values":
		return upload{body: r.Body, rest: nothingMore}, 0, ""
	default:
		return up, http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q is not supported; use multipart/form-data or text/csv", mt)
	}
}

// nextFilePart skips parts up to the next one named file; nil at the end.
func nextFilePart(mr *multipart.Reader, maxFile int64) (*multipart.Part, int, string) {
	for {
		part, err := mr.NextPart()
		var tooBig *http.MaxBytesError
		switch {
		case err == io.EOF:
			return nil, 0, ""
		case errors.As(err, &tooBig):
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the multipart body is larger than the %d bytes allowed: %d for the list file, %d for the other parts and headers",
				maxFile+maxUploadOverhead, maxFile, maxUploadOverhead)
		case isSlowBody(err):
			return nil, http.StatusRequestTimeout, slowBodyMessage(err)
		case err != nil:
			return nil, http.StatusBadRequest, "malformed multipart body"
		}
		if part.FormName() == "file" {
			return part, 0, ""
		}
		_ = part.Close()
	}
}

// streamUpload copies the body to the store without holding it in memory.
// A failed or oversized upload leaves no object behind.
func (s *Server) streamUpload(ctx context.Context, key string, body io.Reader) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.store.NewWriter(wctx, key, nil)
	if err != nil {
		return 0, err
	}
	limited := &maxReader{r: body, remaining: s.cfg.MaxUploadBytes, limit: s.cfg.MaxUploadBytes}
	n, err := copyUpload(w, limited)
	if err == nil && n == 0 {
		err = errEmptyUpload
	}
	if err != nil {
		cancel() // discards the partial object
		_ = w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return n, nil
}

// maxReader fails with *http.MaxBytesError past limit bytes.
type maxReader struct {
	r         io.Reader
	remaining int64
	limit     int64
}

func (m *maxReader) Read(p []byte) (int, error) {
	if m.remaining < 0 {
		return 0, &http.MaxBytesError{Limit: m.limit}
	}
	if int64(len(p)) > m.remaining+1 {
		p = p[:m.remaining+1]
	}
	n, err := m.r.Read(p)
	m.remaining -= int64(n)
	if m.remaining < 0 {
		return n, &http.MaxBytesError{Limit: m.limit}
	}
	return n, err
}

// checkZip opens an uploaded zip the way preparation will, so a broken
// archive is refused at once. msg is the client's problem; err is ours.
func (s *Server) checkZip(ctx context.Context, key string) (msg string, err error) {
	ra, size, err := s.store.NewReaderAt(ctx, key)
	if err != nil {
		return "", err
	}
	_, rc, err := listfile.OpenZip(ra, size, s.cfg.Limits)
	if err != nil {
		if listfile.IsBadInput(err) {
			return err.Error(), nil
		}
		return "", err
	}
	return "", rc.Close()
}
