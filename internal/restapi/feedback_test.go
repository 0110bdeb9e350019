package restapi_test

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/restapi"
)

// postFeedback posts a multipart body to base's /feedback/v1 with key in
// the query (none when "") and validates the answer against openapi.json.
func postFeedback(t *testing.T, base, key string, body []byte, contentType string) response {
	t.Helper()
	u := base + "/feedback/v1"
	if key != "" {
		u += "?" + url.Values{"api_key": {key}}.Encode()
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	return do(t, req)
}

// feedbackFile posts file as the part "file".
func feedbackFile(t *testing.T, key, file string) response {
	t.Helper()
	body, ct := multipartFile(t, "feedback.tsv", []byte(file))
	return postFeedback(t, baseURL, key, body, ct)
}

type frReasons struct {
	Assessment string `json:"assessment"`
	Risk       struct {
		Score int `json:"score"`
	} `json:"risk"`
	Reasons []struct {
		Code string `json:"code"`
	} `json:"reasons"`
}

func (a frReasons) codes() []string {
	var out []string
	for _, r := range a.Reasons {
		out = append(out, r.Code)
	}
	return out
}

func frOf(t *testing.T, kv ...string) frReasons {
	t.Helper()
	var a frReasons
	jsonInto(t, fr(t, q(append([]string{"api_key", keyFraud}, kv...)...)), &a)
	return a
}

// TestFraudFeedback: a feedback file changes what /fr says of the reported
// address, IP and phone.
func TestFraudFeedback(t *testing.T) {
	query := []string{"email", "mallory.fb@good.test", "ip", "73.1.2.3", "phone", "+1 650 253 0000"}
	frOf(t, query...) // the address and domain seen once, so that later answers differ by the reports only
	before := frOf(t, query...)
	reported := []string{"email_reported", "ip_reported", "phone_reported"}
	for _, c := range reported {
		if slices.Contains(before.codes(), c) {
			t.Fatalf("before any report: %v", before.codes())
		}
	}
	file := "Email\tfraud_type\tip\tphone\tdate\treference_id\r\n" +
		"Mallory.FB@good.test\tchargeback\t73.1.2.3\t(650) 253-0000\t2026-01-02\tcase-1\r\n" +
		"\r\n" + // blank lines are not records
		"trudy.fb@good.test\tAccount Takeover\t\t\t\tcase-2\r\n" +
		"not-an-address\tchargeback\t\t\t\t\r\n" + // skipped: email
		"eve.fb@good.test\tsuspicious\t\t\t\t\r\n" + // skipped: fraud type
		"eve.fb@good.test\tbot\t999.1.1.1\t\t\t\r\n" + // skipped: ip
		"eve.fb@good.test\tbot\t\t12\t\t\r\n" + // skipped: phone
		"eve.fb@good.test\tbot\t\t\tyesterday\t\r\n" + // skipped: date
		"eve.fb@good.test\tbot\r\n" + // skipped: too few fields
		"eve.fb@good.test\tbot\t\t\t\t\textra\r\n" + // skipped: too many fields
		"\x00\xff\xfe\tbot\t\t\t\t\r\n" // skipped: binary
	r := feedbackFile(t, keyFraud, file)
	got := r.json(t)
	id, _ := got["feedback_id"].(string)
	delete(got, "feedback_id")
	want := map[string]any{"total_records": 10.0, "skipped_records": 8.0}
	if r.code != http.StatusOK || !reflect.DeepEqual(got, want) || !strings.HasPrefix(id, "fb_") {
		t.Fatalf("%d %s, want %v and a feedback_id", r.code, r.body, want)
	}
	after := frOf(t, query...)
	for _, c := range reported {
		if !slices.Contains(after.codes(), c) {
			t.Errorf("after the report, reasons %v lack %s", after.codes(), c)
		}
	}
	if wantScore := min(100, before.Risk.Score+45+25+25); after.Risk.Score != wantScore || after.Assessment != "likely_fraud" {
		t.Errorf("score %d -> %d (%s), want %d likely_fraud", before.Risk.Score, after.Risk.Score, after.Assessment, wantScore)
	}
	// The second reported address; the skipped ones are not reported.
	if a := frOf(t, "email", "trudy.fb@good.test"); !slices.Contains(a.codes(), "email_reported") {
		t.Errorf("trudy: %v", a.codes())
	}
	if a := frOf(t, "email", "eve.fb@good.test", "ip", "73.1.2.4"); slices.Contains(a.codes(), "email_reported") || slices.Contains(a.codes(), "ip_reported") {
		t.Errorf("eve was only in skipped rows: %v", a.codes())
	}
	// Another address from the reported IP.
	if a := frOf(t, "email", "carol.fb@good.test", "ip", "73.1.2.3"); !slices.Contains(a.codes(), "ip_reported") || slices.Contains(a.codes(), "email_reported") {
		t.Errorf("carol from the reported IP: %v", a.codes())
	}
	// A key for every service may report too.
	if r := feedbackFile(t, keyAll, "email\tfraud_type\nzed.fb@good.test\tspam\n"); r.code != 200 ||
		!regexp.MustCompile(`^\{"total_records":1,"skipped_records":0,"feedback_id":"fb_[0-9a-f]{24}"\}\n$`).Match(r.body) {
		t.Errorf("all-services key: %d %s", r.code, r.body)
	}
}

func TestFraudFeedbackRefusals(t *testing.T) {
	good := "email\tfraud_type\nx.fb@good.test\tbot\n"
	twoFiles := func() ([]byte, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for range 2 {
			fw, _ := mw.CreateFormFile("file", "f.tsv")
			_, _ = fw.Write([]byte(good))
		}
		_ = mw.Close()
		return buf.Bytes(), mw.FormDataContentType()
	}
	otherPart := func() ([]byte, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("upload", "f.tsv")
		_, _ = fw.Write([]byte(good))
		_ = mw.Close()
		return buf.Bytes(), mw.FormDataContentType()
	}
	for _, tc := range []struct {
		name   string
		r      func() response
		code   int
		prefix string
	}{
		{"unknown column", func() response {
			return feedbackFile(t, keyFraud, "email\tfraud_type\tcolour\nx@good.test\tbot\tred\n")
		},
			400, `Bad request: Unrecognized column header "colour" (column 3); the columns are tab-separated, named from: email, fraud_type, ip, phone, country, date, reference_id.`},
		{"comma-separated", func() response { return feedbackFile(t, keyFraud, "email,fraud_type\nx@good.test,bot\n") },
			400, `Bad request: Unrecognized column header "email,fraud_type" (column 1)`},
		{"no header row", func() response { return feedbackFile(t, keyFraud, "x@good.test\tbot\n") },
			400, `Bad request: Unrecognized column header "x@good.test" (column 1)`},
		{"invalid UTF-8 header", func() response { return feedbackFile(t, keyFraud, "email\t\xff\xfe\n") },
			400, `Bad request: Unrecognized column header "?" (column 2)`},
		{"duplicate column", func() response { return feedbackFile(t, keyFraud, "email\tfraud_type\tEMAIL\n") },
			400, `Bad request: Duplicate column header "email" (column 3).`},
		{"missing fraud_type", func() response { return feedbackFile(t, keyFraud, "email\tip\nx@good.test\t1.2.3.4\n") },
			400, `Bad request: Missing column header "fraud_type"; email and fraud_type are required.`},
		{"empty file", func() response { return feedbackFile(t, keyFraud, "") }, 400, "Bad request: the file is empty"},
		{"not multipart", func() response {
			return postFeedback(t, baseURL, keyFraud, []byte(good), "text/tab-separated-values")
		}, 400, "Bad request: send multipart/form-data with the file in a part named file."},
		{"two file parts", func() response { b, ct := twoFiles(); return postFeedback(t, baseURL, keyFraud, b, ct) },
			400, "Bad request: more than one part named file."},
		{"no file part", func() response { b, ct := otherPart(); return postFeedback(t, baseURL, keyFraud, b, ct) },
			400, "Bad request: the multipart body has no part named file."},
		{"broken multipart", func() response {
			return postFeedback(t, baseURL, keyFraud, []byte("--x\r\nnot a part"), "multipart/form-data; boundary=x")
		}, 400, "Bad request: malformed multipart body."},
		{"missing key", func() response { return feedbackFile(t, "", good) }, 400, "Bad request: Missing API key: pass it in the api_key query parameter."},
		{"unknown key", func() response { return feedbackFile(t, "nope-nope-nope-nope", good) }, 400, "Bad request: Invalid API key."},
		{"key not enabled for fraud", func() response { return feedbackFile(t, keyAppend, good) }, 400, "Bad request: This API key is not enabled for fraud."},
		{"validation-only key", func() response { return feedbackFile(t, keyAcme, good) }, 400, "Bad request: This API key is not enabled for fraud."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r()
			if r.code != tc.code || !strings.HasPrefix(string(r.body), tc.prefix) || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
				t.Errorf("%d %q, want %d %q...", r.code, r.body, tc.code, tc.prefix)
			}
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, baseURL+"/feedback/v1?api_key="+keyFraud, nil)
		if r := do(t, req); r.code != http.StatusMethodNotAllowed {
			t.Errorf("GET: %d", r.code)
		}
	})
}

// TestFraudFeedbackTooLarge: a file over the limit is a 413 and nothing of
// it is recorded.
func TestFraudFeedbackTooLarge(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := startAPI(ctx, restapi.Config{FeedbackMaxBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	var file strings.Builder
	file.WriteString("email\tfraud_type\n")
	for file.Len() <= 1024 {
		file.WriteString("big.fb@good.test\tbot\n")
	}
	body, ct := multipartFile(t, "big.tsv", []byte(file.String()))
	r := postFeedback(t, base, keyFraud, body, ct)
	if r.code != http.StatusRequestEntityTooLarge || string(r.body) != "File too large: at most 1024 bytes.\n" {
		t.Errorf("%d %q", r.code, r.body)
	}
	// Far over the limit, its length said up front: refused before the
	// body is read. With "Expect: 100-continue" the client sends none
	// and reads the answer; without, a 1.4 MB upload the server stops
	// reading may meet a reset before the answer (seen once in make test).
	huge := strings.Repeat("huge.fb@good.test\tbot\n", 1<<16)
	body, ct = multipartFile(t, "huge.tsv", []byte("email\tfraud_type\n"+huge))
	req, err := http.NewRequest(http.MethodPost, base+"/feedback/v1?"+url.Values{"api_key": {keyFraud}}.Encode(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Expect", "100-continue")
	if r := do(t, req); r.code != http.StatusRequestEntityTooLarge || string(r.body) != "File too large: at most 1024 bytes.\n" {
		t.Errorf("huge: %d %.100q", r.code, r.body)
	}
	// Just under the limit is fine.
	body, ct = multipartFile(t, "ok.tsv", []byte("email\tfraud_type\nok.fb@good.test\tbot\n"))
	if r := postFeedback(t, base, keyFraud, body, ct); r.code != http.StatusOK {
		t.Errorf("small file: %d %s", r.code, r.body)
	}
	// The refused files left no report (each API has its own in-memory history).
	req, _ = http.NewRequest(http.MethodGet, base+"/fr?"+q("api_key", keyFraud, "email", "big.fb@good.test").Encode(), nil)
	var a frReasons
	jsonInto(t, do(t, req), &a)
	if slices.Contains(a.codes(), "email_reported") {
		t.Errorf("a refused file was recorded: %v", a.codes())
	}
}
