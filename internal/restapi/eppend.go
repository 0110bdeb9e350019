package restapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// GET /v5/eppend, in the published shapes: email append (a name and postal
// address in, the person's email out, by people.MatchNamePostal: the
// matcher of the email_append list service) answers
// {"email_append": [{"email", "email_match_type"}]}; postal append (an
// email in, the person's name and postal address out, by people.Match of
// the email alone) answers {"postal_address": {...}}; both {} when nothing
// matched. An email append request that cannot be matched (required input
// missing, not a US postal address) is answered inside a 200 as
// {"error_code": 400, "error_msg": ...}; no identifying parameter at all,
// a malformed email or match_type, and key errors are plain-text 4xx.

// appendedEmail is one entry of email_append.
type appendedEmail struct {
	Email string `json:"email"`
	// MatchType is Individual (the named person) or Household (the
	// household's primary member), as in the email_append list column.
	MatchType string `json:"email_match_type"`
}

type emailAppendAnswer struct {
	EmailAppend []appendedEmail `json:"email_append"`
}

// postalAddress is the postal append answer: address is the street line
// (number and name), zip as stored (5 digits, or with the extension).
type postalAddress struct {
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	Address   string `json:"address,omitempty"`
	City      string `json:"city,omitempty"`
	State     string `json:"state,omitempty"`
	Zip       string `json:"zip,omitempty"`
}

type postalAppendAnswer struct {
	PostalAddress postalAddress `json:"postal_address"`
}

// inBodyError is an unusable request answered inside a 200 (as bulk items
// are).
type inBodyError struct {
	Code int    `json:"error_code"`
	Msg  string `json:"error_msg"`
}

func writeInBodyError(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusOK, inBodyError{Code: http.StatusBadRequest, Msg: msg})
}

// emptyAnswer is the answer when nothing matched.
var emptyAnswer = []byte("{}\n")

func hasEmailParam(in *people.Input) bool {
	return strings.TrimSpace(in.Email) != "" || strings.TrimSpace(in.MD5Email) != "" || strings.TrimSpace(in.SHA1Email) != ""
}

// emailPostalAppend serves GET /v5/eppend.
func (s *Server) emailPostalAppend(w http.ResponseWriter, r *http.Request, _ *apikey.Key, q url.Values) {
	in := singleInput(q)
	if hasEmailParam(&in) {
		s.postalAppend(w, r, people.Input{Email: in.Email, MD5Email: in.MD5Email, SHA1Email: in.SHA1Email})
		return
	}
	individualOnly := false
	switch q.Get("match_type") {
	case "", "H":
	case "I":
		individualOnly = true
	default:
		invalidParam(w, "match_type")
		return
	}
	if msg := checkEmailAppendInput(&in); msg != "" {
		writeInBodyError(w, msg)
		return
	}
	f, ok := s.cfg.People.(people.NamePostalFinder)
	if !ok {
		writeText(w, http.StatusNotImplemented, "Email append is not available: the people store has no name/postal index.")
		return
	}
	items := [1]people.Input{in}
	res, err := people.MatchNamePostal(r.Context(), f, items[:])
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "email append", err)
		return
	}
	m := res[0]
	if m.Level == people.LevelNone || m.Level == people.LevelHousehold && individualOnly {
		writeJSONBytes(w, http.StatusOK, emptyAnswer)
		return
	}
	// The person's email first, then their other addresses: each reaches
	// the same person (or household).
	out := emailAppendAnswer{EmailAppend: []appendedEmail{{Email: m.Record.Email, MatchType: m.Level.String()}}}
	for _, e := range m.Record.AltEmails {
		out.EmailAppend = append(out.EmailAppend, appendedEmail{Email: e, MatchType: m.Level.String()})
	}
	writeJSON(w, http.StatusOK, out)
}

// checkEmailAppendInput returns why an email append request cannot be
// matched ("" when it can): the input it lacks, or the part of its US
// postal address that cannot be. A state given by name is replaced by its
// code.
func checkEmailAppendInput(in *people.Input) string {
	zip := in.Zip
	if strings.TrimSpace(zip) == "" {
		zip = in.Zip4
	}
	code, problem := fraud.USPostal(in.State, zip)
	switch problem {
	case fraud.USPostalState:
		return "Invalid US postal address: state is not a US state."
	case fraud.USPostalZip:
		return "Invalid US postal address: zip is not a US ZIP code."
	case fraud.USPostalZipState:
		return "Invalid US postal address: zip is not in the state."
	}
	if code != "" {
		in.State = code
	}
	switch {
	case people.NormalizeName(in.Last) == "":
		return "Missing required input: last."
	case people.NormalizeName(in.First) == "" && strings.TrimSpace(in.Street) == "":
		return "Missing required input: first or street."
	case !in.HasNamePostal():
		return "Missing required input: zip, or city and state."
	}
	return ""
}

// postalAppend answers the name and postal address of the email's owner
// (an Individual match of the email alone), or {}.
func (s *Server) postalAppend(w http.ResponseWriter, r *http.Request, in people.Input) {
	if !checkIdentifier(w, &in) {
		return
	}
	items := [1]people.Input{in}
	res, err := people.Match(r.Context(), s.cfg.People, items[:])
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "postal append", err)
		return
	}
	m := res[0]
	if m.Level != people.LevelIndividual || m.Record == nil {
		writeJSONBytes(w, http.StatusOK, emptyAnswer)
		return
	}
	p := m.Record
	writeJSON(w, http.StatusOK, postalAppendAnswer{PostalAddress: postalAddress{
		FirstName: p.First, LastName: p.Last, Address: p.Street, City: p.City, State: p.State, Zip: p.Zip}})
}
