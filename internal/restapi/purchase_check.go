package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// The purchase body is checked whole before anything is written: unknown
// names at any level, wrong JSON types and trailing data are refused with a
// message naming what is valid.

// Valid names at each level of the purchase body.
var (
	purchaseKeys    = []string{"fields", "options"}
	purchaseOptions = []string{"email_append"}
	appendOptions   = []string{"match_type"}
)

// decodePurchase parses the optional body; msg says what is wrong.
func decodePurchase(body []byte) (req purchaseRequest, msg string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return req, ""
	}
	top, msg := jsonObject(body, "the purchase body", purchaseKeys)
	if msg != "" {
		return req, msg
	}
	if raw, ok := top["fields"]; ok {
		if err := json.Unmarshal(raw, &req.Fields); err != nil {
			return req, "fields must be an array of strings, like [\"email_match_type\"]"
		}
	}
	raw, ok := top["options"]
	if !ok {
		return req, ""
	}
	opts, msg := jsonObject(raw, "options", purchaseOptions)
	if msg != "" {
		return req, msg
	}
	if raw, ok := opts["email_append"]; ok {
		ea, msg := jsonObject(raw, "options.email_append", appendOptions)
		if msg != "" {
			return req, msg
		}
		if raw, ok := ea["match_type"]; ok {
			if err := json.Unmarshal(raw, &req.Options.EmailAppend.MatchType); err != nil {
				return req, "options.email_append.match_type must be the string I or H"
			}
		}
	}
	return req, ""
}

// jsonObject decodes one JSON object (and nothing after it) whose keys must
// be among valid.
func jsonObject(data []byte, what string, valid []string) (map[string]json.RawMessage, string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Sprintf("%s must be a JSON object with any of: %s", what, strings.Join(valid, ", "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Sprintf("%s has data after its closing brace", what)
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(valid, k) {
			unknown = append(unknown, fmt.Sprintf("%q", truncate(k, 40)))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Sprintf("%s has unknown name(s) %s; valid: %s", what, strings.Join(unknown, ", "), strings.Join(valid, ", "))
	}
	return m, ""
}

func (req purchaseRequest) delivery() pipeline.Delivery {
	return pipeline.Delivery{Fields: req.Fields, IndividualOnly: req.Options.EmailAppend.MatchType == "I"}
}

// deliveredBody says what a purchase delivered: the service columns in the
// file and, for email_append, the match type.
type deliveredBody struct {
	Fields    []string `json:"fields"`
	MatchType string   `json:"match_type,omitempty"`
}

// listColumns reads the service columns of a prepared list from its plan;
// nil when the list is not prepared yet.
func (s *Server) listColumns(ctx context.Context, l *listsv1.EmailList) ([]string, error) {
	if l.Status.Shards == 0 {
		return nil, nil
	}
	plan, err := pipeline.LoadPlan(ctx, s.store, blobstore.ListKeys{UID: string(l.UID)})
	if blobstore.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return plan.Columns, nil
}

// delivered describes what the list's result file holds.
func delivered(l *listsv1.EmailList, columns []string) *deliveredBody {
	d := &deliveredBody{Fields: columns}
	mt := ""
	if l.Status.Delivery != nil {
		if len(l.Status.Delivery.Fields) > 0 {
			d.Fields = l.Status.Delivery.Fields
		}
		mt = l.Status.Delivery.MatchType
	}
	if slices.Contains(columns, pipeline.MatchTypeColumn) {
		if mt == "" {
			mt = "H"
		}
		d.MatchType = mt
	}
	if d.Fields == nil {
		d.Fields = []string{}
	}
	return d
}

// sameAsDelivered reports whether req asks for what the list delivered.
func sameAsDelivered(l *listsv1.EmailList, req purchaseRequest, columns []string) bool {
	return listsv1.SameDelivery(l.Status.Delivery, req.Fields, req.Options.EmailAppend.MatchType, columns)
}
