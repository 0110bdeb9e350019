package restapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// Bulk limits.
const (
	bulkMaxItems = 5000
	// bulkMaxBytes bounds the body: 5,000 items of generous size.
	bulkMaxBytes = 16 << 20
)

// bulkAppend serves POST /v5/ei/bulk: a JSON array of at most 5,000
// people, decoded item by item; the answer is an array in input order with
// {} where nothing matched, and {"error_code": 400, "error_msg": "Invalid
// identifier"} in place of an item whose identifier cannot be used
// (people.Input.Check). A bad item never fails the batch.
func (s *Server) bulkAppend(w http.ResponseWriter, r *http.Request) {
	only, bad := parseFields(r.URL.Query().Get("fields"), demographicFields)
	if bad != "" {
		writeError(w, r, http.StatusBadRequest, "BadRequest", fmt.Sprintf("fields: %q is not a demographic field (%s)", truncate(bad, 40), strings.Join(demographicFields, ", ")))
		return
	}
	items, itemErrs, status, msg := decodeBulk(http.MaxBytesReader(w, r.Body, bulkMaxBytes))
	if status != 0 {
		code := "BadRequest"
		switch status {
		case http.StatusRequestEntityTooLarge:
			code = "TooLarge"
		case http.StatusRequestTimeout:
			code = "SlowUpload"
		}
		writeError(w, r, status, code, msg)
		return
	}
	results, err := people.Match(r.Context(), s.cfg.People, items)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "match", err)
		return
	}
	b := make([]byte, 0, 64+len(results)*256)
	b = append(b, '[')
	for i := range results {
		if i > 0 {
			b = append(b, ',')
		}
		if itemErrs[i] != "" {
			b = appendItemError(b, itemErrs[i])
			continue
		}
		if items[i].Check() != nil {
			b = append(b, invalidIdentifier...)
			continue
		}
		b = appendDemographics(b, &results[i], only)
	}
	b = append(b, ']', '\n')
	writeJSONBytes(w, http.StatusOK, b)
}

// decodeBulk streams the array. An item that is not an object, or whose
// known fields are not strings (or null), is rejected on its own: itemErrs
// says why, in its place, and its input matches nothing. Malformed JSON and
// anything after the array reject the request.
func decodeBulk(body io.Reader) (items []people.Input, itemErrs []string, status int, msg string) {
	dec := json.NewDecoder(body)
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, bodyStatus(err), "the body must be a JSON array of people: " + cleanJSONErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, nil, http.StatusBadRequest, "the body must be a JSON array of people"
	}
	items = make([]people.Input, 0, 256)
	itemErrs = make([]string, 0, 256)
	for dec.More() {
		if len(items) == bulkMaxItems {
			return nil, nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("at most %d people per request; split the array", bulkMaxItems)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, bodyStatus(err), fmt.Sprintf("item %d: %s", len(items)+1, cleanJSONErr(err))
		}
		in, bad := bulkItem(raw)
		items, itemErrs = append(items, in), append(itemErrs, bad)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, bodyStatus(err), "the JSON array is not closed: " + cleanJSONErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if status := bodyStatus(err); err != nil && status != http.StatusBadRequest {
			return nil, nil, status, cleanJSONErr(err) // too large, or too slow
		}
		return nil, nil, http.StatusBadRequest, "the body has data after the closing ] of the array"
	}
	return items, itemErrs, 0, ""
}

// bulkFields are the item fields the matcher reads.
var bulkFields = people.InputFields

// appendItemError renders a rejected item in its place, in the published
// per-item error shape.
func appendItemError(b []byte, msg string) []byte {
	e, _ := json.Marshal(struct {
		Code int    `json:"error_code"`
		Msg  string `json:"error_msg"`
	}{http.StatusBadRequest, msg})
	return append(b, e...)
}

// bulkItem decodes one item; msg says what is wrong with it.
func bulkItem(raw json.RawMessage) (people.Input, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return people.Input{}, "the item must be a JSON object"
	}
	for _, f := range bulkFields {
		v, ok := m[f]
		if !ok || string(v) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return people.Input{}, fmt.Sprintf("%s must be a string, not %s", f, jsonKind(v))
		}
	}
	var in people.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return people.Input{}, "the item must be a JSON object of strings"
	}
	return in, ""
}

func jsonKind(v json.RawMessage) string {
	switch t := strings.TrimSpace(string(v)); {
	case strings.HasPrefix(t, "{"):
		return "an object"
	case strings.HasPrefix(t, "["):
		return "an array"
	case t == "true" || t == "false":
		return "a boolean"
	default:
		return "a number"
	}
}

func bodyStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	if isSlowBody(err) {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

func cleanJSONErr(err error) string {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Sprintf("the body is larger than %d bytes", bulkMaxBytes)
	}
	if isSlowBody(err) {
		return slowBodyMessage(err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of the body"
	}
	return err.Error()
}
