package restapi

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/logging"
)

// resultsNotFound answers a list_id without a list: 404 FileNotFound.
func resultsNotFound(w http.ResponseWriter, r *http.Request, id int64) {
	writeError(w, r, http.StatusNotFound, "FileNotFound", fmt.Sprintf("no result file for list %d", id))
}

// serveResult streams the result file. Not ready: 401 (as the spec says). A
// report list not purchased yet: 404 reportOnly.
func (s *Server) serveResult(w http.ResponseWriter, r *http.Request, l *listsv1.EmailList) {
	switch l.Status.Phase {
	case listsv1.PhaseResults:
	case listsv1.PhaseProcessed:
		writeError(w, r, http.StatusNotFound, "reportOnly", "the list was submitted with action=report; purchase it to download the results")
		return
	case listsv1.PhaseFailed:
		writeError(w, r, http.StatusNotFound, "FileNotFound", "the list failed; it has no result file")
		return
	default:
		writeError(w, r, http.StatusUnauthorized, "NotReady", "Result file is not ready.")
		return
	}
	res := l.Status.Result
	if res == nil {
		writeError(w, r, http.StatusNotFound, "FileNotFound", "the result file is missing")
		return
	}
	rd, err := s.store.NewReader(r.Context(), res.Key, nil)
	if err != nil {
		if blobstore.IsNotFound(err) {
			writeError(w, r, http.StatusNotFound, "FileNotFound", "the result file is missing")
			return
		}
		s.internalError(w, r, "open result", err)
		return
	}
	defer rd.Close()
	h := w.Header()
	h.Set("Content-Type", pipeline.ContentType(res.FileName))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": res.FileName}))
	h.Set("Content-Length", strconv.FormatInt(rd.Size(), 10))
	h.Set("ETag", `"`+res.SHA256+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, rd); err != nil {
		s.log.Debug("result download interrupted", logging.KeyRequestID, requestIDFrom(r.Context()), logging.KeyError, err.Error())
	}
}
