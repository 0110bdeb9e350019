package sdkcontract

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// One function per SDK: the requests of its public methods, as its source
// builds them (see the package comment).

func python(p Params) []Call {
	r, k := p.Person, p.Key
	ua := header("User-Agent", "TowerDataApi/Python/1.2")
	td := "/v5/td?api_key=" + k
	q := pyQuote
	get := func(method, target string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: "python", Method: method, Verb: http.MethodGet, Target: target, Header: ua, Check: check}
	}
	// do_bulk_query encodes the list with json.JSONEncoder (", " and ": "
	// separators) and posts it to the bulk path; its fields argument is
	// not sent.
	bulkBody := fmt.Sprintf(`[{"email": %q}, {"email": %q}]`, r.Email, p.Other.Email)
	return []Call{
		get("validate_email(email)", "/v5/ev?api_key="+k+"&email="+q(r.Email), safeToSend),
		get("validate_email(email, timeout=2.5)", "/v5/ev?api_key="+k+"&email="+q(r.Email)+"&timeout=2.5", safeToSend),
		get("query_by_email(email)", td+"&email="+q(r.Email), demographicsOf(r)),
		get("query_by_email(email, fields=...)", td+"&email="+q(r.Email)+"&fields="+q("age,gender"), onlyFields(r, "age", "gender")),
		// hash_email: the SHA-1 of email.lower() (Python 2 semantics; on
		// Python 3 the SDK raises before sending).
		get("query_by_email(email, hash_email=True)", td+"&sha1_email="+q(sha1Hex(strings.ToLower(r.Email))), demographicsOf(r)),
		get("query_by_md5(md5)", td+"&md5_email="+q(md5Hex(r.Email)), demographicsOf(r)),
		get("query_by_sha1(sha1, fields=...)", td+"&sha1_email="+q(sha1Hex(r.Email))+"&fields="+q("age"), onlyFields(r, "age")),
		get("query_by_nap(first, last, street, city, state)", fmt.Sprintf("%s&first=%s&last=%s&street=%s&city=%s&state=%s",
			td, q(r.First), q(r.Last), q(r.Street), q(r.City), q(r.State)), demographicsOf(r)),
		get("query_by_nap(..., email)", fmt.Sprintf("%s&first=%s&last=%s&street=%s&city=%s&state=%s&email=%s",
			td, q(r.First), q(r.Last), q(r.Street), q(r.City), q(r.State), q(r.Email)), demographicsOf(r)),
		get("query_by_naz(first, last, zip4)", fmt.Sprintf("%s&first=%s&last=%s&zip4=%s", td, q(r.First), q(r.Last), zip4(r)), demographicsOf(r)),
		get("query_by_naz(..., email)", fmt.Sprintf("%s&first=%s&last=%s&zip4=%s&email=%s", td, q(r.First), q(r.Last), zip4(r), q(r.Email)), demographicsOf(r)),
		get("append_email(first, last, street, city, state, zip)", fmt.Sprintf("/v5/eppend?api_key=%s&first=%s&last=%s&street=%s&city=%s&state=%s&zip=%s",
			k, q(r.First), q(r.Last), q(r.Street), q(r.City), q(r.State), q(r.Zip)), emailAppended(r)),
		get("append_postal(email)", "/v5/eppend?api_key="+k+"&email="+q(r.Email), postalAppended(r)),
		{SDK: "python", Method: "do_bulk_query(data)", Verb: http.MethodPost, Target: "/v5/ei/bulk?api_key=" + k,
			Header: header("User-Agent", "TowerDataApi/Python/1.2", "Content-Type", "application/json"),
			Body:   []byte(bulkBody), Check: bulkOf(r.Age, p.Other.Age)},
	}
}

func java(p Params) []Call {
	r, k := p.Person, p.Key
	ua := header("User-Agent", "TowerDataApi/Java/5.0")
	e := javaEncode
	get := func(method, target string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: "java", Method: method, Verb: http.MethodGet, Target: target, Header: ua, Check: check}
	}
	post := func(method, target, body string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: "java", Method: method, Verb: http.MethodPost, Target: target, Body: []byte(body),
			Header: header("User-Agent", "TowerDataApi/Java/5.0", "Content-Type", "application/json"), Check: check}
	}
	set := fmt.Sprintf(`[{"email":%q},{"email":%q}]`, r.Email, p.Other.Email) // new JSONArray(set).toString()
	return []Call{
		get("validateEmail(email)", "/v5/ev?email="+e(r.Email)+"&api_key="+k, safeToSend),
		get("validateEmail(email, 4.9)", "/v5/ev?email="+e(r.Email)+"&api_key="+k+"&timeout="+javaDouble(4.9), safeToSend),
		get("queryByEmail(email)", "/v5/td?email="+e(r.Email)+"&api_key="+k, demographicsOf(r)),
		get("queryByEmail(email, fields)", "/v5/td?email="+e(r.Email)+"&fields="+e("age,gender")+"&api_key="+k, onlyFields(r, "age", "gender")),
		get("queryByEmail(email, true)", "/v5/td?md5_email="+e(md5Hex(strings.ToLower(r.Email)))+"&api_key="+k, demographicsOf(r)),
		get("queryByMd5(md5)", "/v5/td?md5_email="+e(md5Hex(r.Email))+"&api_key="+k, demographicsOf(r)),
		get("queryBySha1(sha1)", "/v5/td?sha1_email="+e(sha1Hex(r.Email))+"&api_key="+k, demographicsOf(r)),
		get("queryByNap(first, last, street, city, state)", "/v5/td?api_key="+k+"&state="+e(r.State)+"&first="+e(r.First)+
			"&last="+e(r.Last)+"&street="+e(r.Street)+"&city="+e(r.City), demographicsOf(r)),
		get("queryByNap(..., email)", "/v5/td?email="+e(r.Email)+"&api_key="+k+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State), demographicsOf(r)),
		get("queryByNaz(first, last, zip4)", "/v5/td?api_key="+k+"&zip4="+zip4(r)+"&first="+e(r.First)+"&last="+e(r.Last), demographicsOf(r)),
		get("queryByNaz(..., email)", "/v5/td?email="+e(r.Email)+"&api_key="+k+"&first="+e(r.First)+"&last="+e(r.Last)+"&zip4="+zip4(r), demographicsOf(r)),
		post("bulkQuery(set)", "/v5/ei/bulk?api_key="+k, set, bulkOf(r.Age, p.Other.Age)),
		// fields is appended unencoded.
		post("bulkQuery(set, fields)", "/v5/ei/bulk?api_key="+k+"&fields=age,gender", set, bulkOf(r.Age, p.Other.Age)),
		get("appendEmail(first, last, street, city, state, zip)", "/v5/eppend?first="+e(r.First)+"&last="+e(r.Last)+"&street="+e(r.Street)+
			"&city="+e(r.City)+"&state="+e(r.State)+"&zip="+e(r.Zip)+"&api_key="+k, emailAppended(r)),
		get("appendPostal(email)", "/v5/eppend?email="+e(r.Email)+"&api_key="+k, postalAppended(r)),
	}
}

// phpCalls are the calls of both PHP SDKs (the function library and the
// PHP 5 class), which differ only in their User-Agent.
func phpCalls(sdk, ua string, p Params) []Call {
	r, k := p.Person, p.Key
	e := phpEncode
	td := "/v5/td?api_key=" + k
	get := func(method, target string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: sdk, Method: method, Verb: http.MethodGet, Target: target, Header: header("User-Agent", ua), Check: check}
	}
	// json_encode escapes '/' (not in these addresses) and writes no spaces.
	set := fmt.Sprintf(`[{"email":%q},{"email":%q}]`, r.Email, p.Other.Email)
	return []Call{
		get("query_by_email($email)", td+"&email="+e(r.Email), demographicsOf(r)),
		get("query_by_email($email, true)", td+"&md5_email="+e(md5Hex(strings.ToLower(r.Email))), demographicsOf(r)),
		get("query_by_md5($md5)", td+"&md5_email="+e(md5Hex(r.Email)), demographicsOf(r)),
		get("query_by_sha1($sha1)", td+"&sha1_email="+e(sha1Hex(r.Email)), demographicsOf(r)),
		get("query_by_nap($first, $last, $street, $city, $state)", td+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State), demographicsOf(r)),
		get("query_by_nap(..., $email)", td+"&email="+e(r.Email)+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State), demographicsOf(r)),
		get("query_by_naz($first, $last, $zip4)", td+"&zip4="+zip4(r)+"&first="+e(r.First)+"&last="+e(r.Last), demographicsOf(r)),
		get("query_by_naz(..., $email)", td+"&email="+e(r.Email)+"&first="+e(r.First)+"&last="+e(r.Last)+"&zip4="+zip4(r), demographicsOf(r)),
		{SDK: sdk, Method: "bulk_query($set)", Verb: http.MethodPost, Target: "/v5/ei/bulk?api_key=" + k,
			Header: header("User-Agent", ua, "Content-Type", "application/json"), Body: []byte(set), Check: bulkOf(r.Age, p.Other.Age)},
	}
}

func php(p Params) []Call  { return phpCalls("php", "TowerDataApi/PHP/1.1", p) }
func php5(p Params) []Call { return phpCalls("php5", "TowerDataApi/PHP5/1.1", p) }

func csharp(p Params) []Call {
	r, k := p.Person, p.Key
	ua := header("User-Agent", "RapleafApi/NET/1.0")
	e := csEncode
	get := func(method, target string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: "csharp", Method: method, Verb: http.MethodGet, Target: target, Header: ua, Check: check}
	}
	post := func(method, body string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: "csharp", Method: method, Verb: http.MethodPost, Target: "/v5/ei/bulk?api_key=" + k, Body: []byte(body),
			Header: header("User-Agent", "RapleafApi/NET/1.0", "Content-Type", "application/json"), Check: check}
	}
	email := strings.ToLower(r.Email)
	md5Upper := strings.ToUpper(md5Hex(email)) // MD5Hex lower-cases, then writes "X2"
	// The name and postal queries use '?' where '&' belongs, and without
	// an email glue the key to the path (see restapi's csharpTDPath).
	return []Call{
		get("queryByEmail(email)", "/v5/td?email="+e(email)+"&api_key="+k, demographicsOf(r)),
		get("queryByEmail(email) with show_available", "/v5/td?email="+e(email)+"&api_key="+k+"&show_available=true", demographicsOf(r)),
		get("queryByEmail(email, true)", "/v5/td?md5_email="+e(md5Upper)+"&api_key="+k, demographicsOf(r)),
		get("queryByMd5(md5)", "/v5/td?md5_email="+e(md5Hex(r.Email))+"&api_key="+k, demographicsOf(r)),
		get("queryBySha1(sha1)", "/v5/td?sha1_email="+e(sha1Hex(r.Email))+"&api_key="+k, demographicsOf(r)),
		get("queryByNap(first, last, street, city, state)", "/v5/td&api_key="+k+"?state="+e(r.State)+"?first="+e(r.First)+
			"?last="+e(r.Last)+"?street="+e(r.Street)+"?city="+e(r.City), demographicsOf(r)),
		get("queryByNap(..., email)", "/v5/td?email="+e(r.Email)+"&api_key="+k+"?first="+e(r.First)+"?last="+e(r.Last)+
			"?street="+e(r.Street)+"?city="+e(r.City)+"?state="+e(r.State), demographicsOf(r)),
		get("queryByNaz(first, last, zip4)", "/v5/td&api_key="+k+"?zip4="+zip4(r)+"?first="+e(r.First)+"?last="+e(r.Last), demographicsOf(r)),
		get("queryByNaz(..., email)", "/v5/td?email="+e(r.Email)+"&api_key="+k+"?first="+e(r.First)+"?last="+e(r.Last)+"?zip4="+zip4(r), demographicsOf(r)),
		post("queryByEmail(emails, false)", fmt.Sprintf(`[{"email":"%s"},{"email":"%s"}]`, email, strings.ToLower(p.Other.Email)), bulkOf(r.Age, p.Other.Age)),
		post("queryByEmail(emails, true)", fmt.Sprintf(`[{"md5_email":"%s"},{"md5_email":"%s"}]`, md5Upper, strings.ToUpper(md5Hex(strings.ToLower(p.Other.Email)))), bulkOf(r.Age, p.Other.Age)),
		// JavaScriptSerializer of a list of dictionaries.
		post("genericBulkQuery(identifiers)", fmt.Sprintf(`[{"first":%q,"last":%q,"zip4":%q},{"email":%q}]`, r.First, r.Last, zip4(r), p.Other.Email), bulkOf(r.Age, p.Other.Age)),
	}
}

func perl(p Params) []Call {
	r, k := p.Person, p.Key
	e := perlEscape
	td := "/v5/td?api_key=" + k
	get := func(method, target string) Call {
		return Call{SDK: "perl", Method: method, Verb: http.MethodGet, Target: target, Header: header("User-Agent", "TowerDataApi/Perl/1.1"), Check: demographicsOf(r)}
	}
	return []Call{
		get("query_by_email($email)", td+"&email="+e(r.Email)),
		get("query_by_email($email, 1)", td+"&md5_email="+e(md5Hex(strings.ToLower(r.Email)))),
		get("query_by_md5($md5)", td+"&md5_email="+e(md5Hex(r.Email))),
		get("query_by_sha1($sha1)", td+"&sha1_email="+e(sha1Hex(r.Email))),
		get("query_by_nap($first, $last, $street, $city, $state)", td+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State)),
		get("query_by_nap(..., $email)", td+"&email="+e(r.Email)+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State)),
		get("query_by_naz($first, $last, $zip4)", td+"&first="+e(r.First)+"&last="+e(r.Last)+"&zip4="+zip4(r)),
		get("query_by_naz(..., $email)", td+"&email="+e(r.Email)+"&first="+e(r.First)+"&last="+e(r.Last)+"&zip4="+zip4(r)),
	}
}

func ruby(p Params) []Call {
	r, k := p.Person, p.Key
	ua := header("User-Agent", "TowerDataApi/Ruby/1.3")
	e := rubyEncode
	td := "/v5/td?api_key=" + k
	get := func(method, target string, check func(int, http.Header, []byte) error) Call {
		return Call{SDK: "ruby", Method: method, Verb: http.MethodGet, Target: target, Header: ua, Check: check}
	}
	return []Call{
		get("query_by_email(email)", td+"&email="+e(r.Email), demographicsOf(r)),
		get("query_by_email(email, hash_email: true)", td+"&sha1_email="+e(sha1Hex(strings.ToLower(r.Email))), demographicsOf(r)),
		get("query_by_md5(md5)", td+"&md5_email="+e(md5Hex(r.Email)), demographicsOf(r)),
		get("query_by_sha1(sha1)", td+"&sha1_email="+e(sha1Hex(r.Email)), demographicsOf(r)),
		get("query_by_nap(first, last, street, city, state)", td+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State), demographicsOf(r)),
		get("query_by_nap(..., email:)", td+"&email="+e(r.Email)+"&first="+e(r.First)+"&last="+e(r.Last)+
			"&street="+e(r.Street)+"&city="+e(r.City)+"&state="+e(r.State), demographicsOf(r)),
		get("query_by_naz(first, last, zip4)", td+"&first="+e(r.First)+"&last="+e(r.Last)+"&zip4="+zip4(r), demographicsOf(r)),
		get("query_by_naz(..., email:)", td+"&email="+e(r.Email)+"&first="+e(r.First)+"&last="+e(r.Last)+"&zip4="+zip4(r), demographicsOf(r)),
		// email_validation and valid_email? are query_by_email reading
		// the email_validation object (the key is enabled for it).
		get("email_validation(typo)", td+"&email="+e(p.Typo), rubyValidation(func(ok bool) bool { return !ok }, correctionOf(p.Typo))),
		get("valid_email?(email)", td+"&email="+e(r.Email), rubyValidation(func(bool) bool { return true }, "")),
		{SDK: "ruby", Method: "bulk_query(set)", Verb: http.MethodPost, Target: "/v5/ei/bulk?api_key=" + k,
			Header: header("User-Agent", "TowerDataApi/Ruby/1.3", "Content-Type", "application/json"),
			Body:   []byte(fmt.Sprintf(`[{"email":%q},{"email":%q}]`, r.Email, p.Other.Email)), Check: bulkOf(r.Age, p.Other.Age)},
	}
}

// bash: queryByEmails hands curl one URL per email, unencoded.
func bash(p Params) []Call {
	var out []Call
	for _, r := range []people.Record{p.Person, p.Other} {
		out = append(out, Call{SDK: "bash", Method: "queryByEmails(" + r.Email + ")", Verb: http.MethodGet,
			Target: "/v5/td?api_key=" + p.Key + "&email=" + r.Email,
			Header: header("User-Agent", "TowerDataApi/bash/1.0"), Check: demographicsOf(r)})
	}
	return out
}

// correctionOf is the correction of a typo address for the ruby check:
// the domain gmial.com becomes gmail.com.
func correctionOf(typo string) string {
	return strings.Replace(typo, "@gmial.com", "@gmail.com", 1)
}
