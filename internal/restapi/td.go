package restapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// GET /v5/td: the demographics of one person, found by email (plain, MD5
// or SHA-1), by name and postal address (street, city, state; or zip, or
// zip4), or both (the email first). It runs the same matcher and the same
// renderer as POST /v5/ei/bulk: people.Match of a one-item batch,
// appendDemographicFields. Errors are plain text, as on GET /v5/ev.

// singleInput reads the person of a GET /v5/td or GET /v5/eppend query.
func singleInput(q url.Values) people.Input {
	return people.Input{
		Email: plusInEmail(q.Get(people.FieldEmail)), MD5Email: q.Get(people.FieldMD5Email), SHA1Email: q.Get(people.FieldSHA1Email),
		First: q.Get(people.FieldFirst), Middle: q.Get(people.FieldMiddle), Last: q.Get(people.FieldLast),
		Street: q.Get(people.FieldStreet), City: q.Get(people.FieldCity), State: q.Get(people.FieldState),
		Zip: q.Get(people.FieldZip), Zip4: q.Get(people.FieldZip4),
	}
}

// plusInEmail restores a '+' that a client left unencoded in the query
// (the ruby SDK's URI.encode does), which form decoding turned into a
// space: an address with an inner space is never valid, one with a '+'
// may be.
func plusInEmail(e string) string {
	if t := strings.TrimSpace(e); strings.IndexByte(t, ' ') > 0 {
		if p := strings.ReplaceAll(t, " ", "+"); people.ValidEmail(people.NormalizeEmail(p)) {
			return p
		}
	}
	return e
}

// hasIdentifier reports whether q has any parameter naming a person (cheap:
// whether they make a usable identifier is the handler's check, which
// answers Missing query parameter(s). as well when they do not).
func hasIdentifier(q url.Values) bool {
	for _, name := range personParams {
		if q.Get(name) != "" {
			return true
		}
	}
	return false
}

var personParams = []string{people.FieldEmail, people.FieldMD5Email, people.FieldSHA1Email, people.FieldFirst, people.FieldLast,
	people.FieldZip, people.FieldZip4, people.FieldStreet, people.FieldCity, people.FieldState}

// invalidParam answers a malformed parameter.
func invalidParam(w http.ResponseWriter, name string) {
	writeText(w, http.StatusBadRequest, "Value of parameter '"+name+"' is invalid.")
}

// checkIdentifier answers 400 and returns false when in cannot be matched.
func checkIdentifier(w http.ResponseWriter, in *people.Input) bool {
	err := in.Check()
	var bad *people.InvalidIdentifierError
	switch {
	case err == nil:
		return true
	case errors.As(err, &bad):
		invalidParam(w, bad.Field)
	default:
		writeText(w, http.StatusBadRequest, "Missing query parameter(s).")
	}
	return false
}

// tdVerifyBudget bounds the email check of GET /v5/td (Config.FraudBudget
// when set, as for GET /fr).
var tdVerifyBudget = frDefaultBudget

// singleDemographics serves GET /v5/td.
func (s *Server) singleDemographics(w http.ResponseWriter, r *http.Request, k *apikey.Key, q url.Values) {
	in := singleInput(q)
	if !checkIdentifier(w, &in) {
		return
	}
	fs, bad := parseFields(q.Get("fields"), tdFields)
	if bad != "" {
		invalidParam(w, "fields")
		return
	}
	format := q.Get("format")
	if format != "" && format != "json" && format != "html" {
		invalidParam(w, "format")
		return
	}
	// The verification object: asked for by name, or, without fields,
	// when the key is enabled for email verification (a key's default
	// answer is every field it may have).
	canEV := k.Enabled(services.EmailValidation)
	if fs != nil && fs[fieldEmailValidation] && !canEV {
		writeText(w, http.StatusForbidden, "This API key is not enabled for email_validation.")
		return
	}
	wantEV := (fs == nil && canEV || fs != nil && fs[fieldEmailValidation]) && s.verifier != nil &&
		people.ValidEmail(people.NormalizeEmail(in.Email))

	items := [1]people.Input{in}
	res, err := people.Match(r.Context(), s.cfg.People, items[:])
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "match", err)
		return
	}
	b := make([]byte, 0, 1024)
	b = append(b, '{')
	b, n := appendDemographicFields(b, &res[0], fs)
	if wantEV {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, fieldEmailValidation)
		b = append(b, ':')
		b = appendTDValidation(b, s.verifyForTD(r.Context(), k, in.Email))
	}
	b = append(b, '}', '\n')
	if format == "html" {
		s.writeHTML(w, r, b)
		return
	}
	writeJSONBytes(w, http.StatusOK, b)
}

func (s *Server) verifyForTD(ctx context.Context, k *apikey.Key, email string) verify.Result {
	budget := s.cfg.FraudBudget
	if budget <= 0 {
		budget = tdVerifyBudget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	return s.verifier.Verify(ctx, email, verify.Options{SMTP: s.cfg.EVSMTP, Tenant: historyTenant(k)})
}

// appendTDValidation appends the email_validation object the ruby SDK
// reads: ok (the address may be sent to: safetosend or valid), status,
// status_code, domain_type and email_correction (the first suggestion),
// the last two only when known. Only these keys: the SDK assigns every key
// to an attribute of the same name and fails on any other.
func appendTDValidation(b []byte, res verify.Result) []byte {
	v := res.SafeToSend()
	ok := v.Status == verify.StatusSafeToSend || v.Status == verify.StatusValid
	b = append(b, `{"ok":`...)
	b = strconv.AppendBool(b, ok)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(v.Status))
	b = append(b, `,"status_code":`...)
	b = strconv.AppendInt(b, int64(v.StatusCode), 10)
	if v.DomainType != "" {
		b = append(b, `,"domain_type":`...)
		b = appendJSONString(b, v.DomainType)
	}
	if len(v.EmailCorrections) > 0 {
		b = append(b, `,"email_correction":`...)
		b = appendJSONString(b, v.EmailCorrections[0])
	}
	return append(b, '}')
}
