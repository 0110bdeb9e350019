package people

import (
	"fmt"

	"github.com/emaildata/emaildata/internal/platform/redact"
)

// ImportSummary is the outcome of one import as the worker's people-import
// and the manager's local loader write it (JSON in the blob store) and the
// Dataset controller reads it: Import's counts, the row errors' messages
// (line and column, never row contents) and, when the import stopped, the
// error Import returned. For example
//
//	{"rows":4,"imported":3,"failed":1,"errors":["line 7: email: invalid email address"]}
type ImportSummary struct {
	Rows     int64    `json:"rows"`
	Imported int64    `json:"imported"`
	Failed   int64    `json:"failed"`
	Errors   []string `json:"errors,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Summary bounds: the row errors carried (then one "... and N more"), and
// the length of one message.
const (
	MaxSummaryErrors  = 20
	maxSummaryMessage = 512
)

// Summarize builds the summary of Import's result res and error err.
func Summarize(res ImportResult, err error) ImportSummary {
	s := ImportSummary{Rows: int64(res.Rows), Imported: int64(res.Imported), Failed: int64(res.Failed)}
	for i := range res.Errors {
		if i == MaxSummaryErrors {
			s.Errors = append(s.Errors, fmt.Sprintf("... and %d more", len(res.Errors)-i))
			break
		}
		s.Errors = append(s.Errors, clip(res.Errors[i].Error(), maxSummaryMessage))
	}
	if err != nil {
		s.Error = clip(redact.Error(err), maxSummaryMessage) // a Dataset's status message
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
