package restapi

import (
	"net/http"
	"net/url"

	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// GET /ae: the other addresses of the person an email (plain, or the MD5
// or SHA-1 of the trimmed, lower-cased address) belongs to, from the people
// store: the person's own other addresses as Individual, then those of the
// other members of their household as Household, each address once,
// {"alternate_email": [{"email", "email_match_type"}]}; {} when the
// address is unknown or nothing else is known. The address asked for is
// never in the answer.

// maxAlternates bounds the answer (a person has at most
// people.MaxAltEmails + 1 addresses; a household may be large).
const maxAlternates = 100

type alternateAnswer struct {
	AlternateEmail []appendedEmail `json:"alternate_email"`
}

// hasEmailIdentifier reports whether q names an address.
func hasEmailIdentifier(q url.Values) bool {
	return q.Get(people.FieldEmail) != "" || q.Get(people.FieldMD5Email) != "" || q.Get(people.FieldSHA1Email) != ""
}

// alternateEmails serves GET /ae.
func (s *Server) alternateEmails(w http.ResponseWriter, r *http.Request, _ *apikey.Key, q url.Values) {
	in := people.Input{Email: plusInEmail(q.Get(people.FieldEmail)), MD5Email: q.Get(people.FieldMD5Email), SHA1Email: q.Get(people.FieldSHA1Email)}
	if !checkIdentifier(w, &in) {
		return
	}
	keys := in.Keys()
	recs, err := s.cfg.People.LookupBatch(r.Context(), keys)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "alternate email", err)
		return
	}
	var rec *people.Record
	var asked people.Key
	for i, p := range recs {
		if p != nil {
			rec, asked = p, keys[i]
			break
		}
	}
	if rec == nil {
		writeJSONBytes(w, http.StatusOK, emptyAnswer)
		return
	}
	var members []people.Record
	if rec.HouseholdID != "" {
		if members, err = s.cfg.People.Household(r.Context(), rec.HouseholdID); err != nil {
			if r.Context().Err() != nil {
				return
			}
			s.internalError(w, r, "alternate email", err)
			return
		}
	}
	out := alternatesOf(rec, members, asked)
	if len(out) == 0 {
		writeJSONBytes(w, http.StatusOK, emptyAnswer)
		return
	}
	writeJSON(w, http.StatusOK, alternateAnswer{AlternateEmail: out})
}

// alternatesOf lists the addresses of rec (Individual) and of the other
// members (Household) but the one asked for, each once, at most
// maxAlternates.
func alternatesOf(rec *people.Record, members []people.Record, asked people.Key) []appendedEmail {
	var out []appendedEmail
	seen := map[string]bool{}
	add := func(p *people.Record, level people.Level) {
		for i := -1; i < len(p.AltEmails); i++ {
			e := p.Email
			if i >= 0 {
				e = p.AltEmails[i]
			}
			if seen[e] || isAsked(e, asked) || len(out) == maxAlternates {
				continue
			}
			seen[e] = true
			out = append(out, appendedEmail{Email: e, MatchType: level.String()})
		}
	}
	add(rec, people.LevelIndividual)
	for i := range members {
		if members[i].Email != rec.Email {
			add(&members[i], people.LevelHousehold)
		}
	}
	return out
}

// isAsked reports whether the stored address e is the one k names.
func isAsked(e string, k people.Key) bool {
	switch k.Kind {
	case people.KeyEmail:
		return e == k.Value
	case people.KeyMD5:
		return people.EmailMD5(e) == k.Value
	case people.KeySHA1:
		return people.EmailSHA1(e) == k.Value
	}
	return false
}
