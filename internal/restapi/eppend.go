package restapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/emaildata/emaildata/internal/apikey"
	"github.com/emaildata/emaildata/internal/people"
)

// GET /v5/eppend: email append (a name and postal address in, the person's
// email out, by people.MatchNamePostal: the matcher of the email_append
// list service) and postal append (an email in, the person's name and
// postal address out, by people.Match of the email alone). Errors are
// plain text.

// eppendEmail is the email append answer.
type eppendEmail struct {
	Email string `json:"email"`
	// MatchType is Individual (the named person) or Household (the
	// household's primary member), as in the email_append list column.
	MatchType string `json:"email_match_type"`
}

// eppendPostal is the postal append answer.
type eppendPostal struct {
	First  string `json:"first,omitempty"`
	Last   string `json:"last,omitempty"`
	Street string `json:"street,omitempty"`
	City   string `json:"city,omitempty"`
	State  string `json:"state,omitempty"`
	Zip    string `json:"zip,omitempty"`
}

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
	if !in.HasNamePostal() {
		writeText(w, http.StatusBadRequest, "Missing query parameter(s).")
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
		writeJSONBytes(w, http.StatusOK, []byte("{}\n"))
		return
	}
	writeJSON(w, http.StatusOK, eppendEmail{Email: m.Record.Email, MatchType: m.Level.String()})
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
		writeJSONBytes(w, http.StatusOK, []byte("{}\n"))
		return
	}
	p := m.Record
	writeJSON(w, http.StatusOK, eppendPostal{First: p.First, Last: p.Last, Street: p.Street, City: p.City, State: p.State, Zip: p.Zip})
}
