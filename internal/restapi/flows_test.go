package restapi_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

const peopleCSV = "id,name,email\n1,\"Doe, John\",john@example.com\n2,Ann,not-an-email\n"

// TestProcessFlow: submit → Results → download, as the spec shows it.
func TestProcessFlow(t *testing.T) {
	r := submit(t, keyAcme, q("email_column", "3", "header", "true", "delimiter", ",", "name", "people.csv"), "people.csv", []byte(peopleCSV))
	id := listID(t, r)
	if loc := r.header.Get("Location"); loc != fmt.Sprintf("/v5/list/%d", id) {
		t.Errorf("Location %q", loc)
	}
	if got := r.json(t)["size_bytes"]; got != float64(len(peopleCSV)) {
		t.Errorf("size_bytes %v, want %d", got, len(peopleCSV))
	}
	st := waitStatus(t, keyAcme, id, "Results")
	if st["name"] != "people.csv" || st["records"] != float64(2) || st["created_at"] == "" {
		t.Errorf("status %v", st)
	}
	svc := st["services"].(map[string]any)["email_validation"].(map[string]any)
	if svc["status"] != "Completed" || svc["input_count"] != float64(2) || svc["completed_count"] != float64(2) {
		t.Errorf("service status %v", svc)
	}
	rep := svc["reporting"].(map[string]any)
	if rep["status"].(map[string]any)["valid"] != float64(1) || rep["status_code"].(map[string]any)["150"] != float64(1) {
		t.Errorf("reporting %v: want counts per status and per code", rep)
	}
	if _, ok := st["reporting"]; ok {
		t.Errorf("top-level reporting belongs to Processed report lists only")
	}

	req := newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), keyAcme, nil, "")
	req.Header.Set("Accept", "text/plain")
	res := do(t, req)
	if res.code != http.StatusOK {
		t.Fatalf("results: %d %s", res.code, res.body)
	}
	wantName := fmt.Sprintf(`attachment; filename=people-%d-results.csv`, id)
	if cd := res.header.Get("Content-Disposition"); cd != wantName {
		t.Errorf("Content-Disposition %q, want %q", cd, wantName)
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("Content-Type %q", ct)
	}
	want := "id,name,email,ev_status,ev_status_code,ev_domain_type,ev_role_account,ev_correction,ev_duplicate,ev_valid,ev_from_history\n" +
		"1,\"Doe, John\",john@example.com,valid,10,biz,false,,false,true,false\n" +
		"2,Ann,not-an-email,invalid,150,,false,,false,false,false\n"
	if string(res.body) != want {
		t.Errorf("result:\n%s\nwant:\n%s", res.body, want)
	}
}

// TestReportFlow: report → Processed with reporting → results withheld →
// purchase → Results → download.
func TestReportFlow(t *testing.T) {
	data := "a@x.com\nb@x.com\nc@y.org\n"
	id := listID(t, submit(t, keyReporter, q("action", "report", "delimiter", ","), "report.txt", []byte(data)))
	st := waitStatus(t, keyReporter, id, "Processed")
	rep, ok := st["reporting"].(map[string]any)
	if !ok || rep["domain"].(map[string]any)["x.com"] != float64(2) {
		t.Fatalf("reporting %v", st["reporting"])
	}
	r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), keyReporter, nil, ""))
	if r.code != http.StatusNotFound || r.json(t)["error"] != "reportOnly" {
		t.Fatalf("results before purchase: %d %s", r.code, r.body)
	}

	purchase := func() response {
		req := newRequest(t, http.MethodPost, fmt.Sprintf("/v5/list/%d/purchase", id), keyReporter, nil, "application/json")
		req.Header.Set("Accept", "text/plain")
		return do(t, req)
	}
	p := purchase()
	if p.code != http.StatusOK || strings.TrimSpace(string(p.body)) != "Results" {
		t.Fatalf("purchase: %d %q", p.code, p.body)
	}
	if p2 := purchase(); p2.code != http.StatusOK {
		t.Fatalf("second purchase: %d %s", p2.code, p2.body)
	}
	waitStatus(t, keyReporter, id, "Results")
	res := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), keyReporter, nil, ""))
	if res.code != http.StatusOK || !strings.Contains(string(res.body), "c@y.org,y.org") {
		t.Fatalf("results: %d %s", res.code, res.body)
	}
	if !strings.HasPrefix(string(res.body), "email,domain\n") {
		t.Errorf("a file without a header gets a synthesised header row: %q", res.body)
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf(".txt result Content-Type %q", ct)
	}
}

// TestZipInZipOut: a zipped list yields a zipped result.
func TestZipInZipOut(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("inner.csv")
	_, _ = w.Write([]byte("email\njohn@example.com\n"))
	_ = zw.Close()
	id := listID(t, submit(t, keyAcme, q("header", "true", "name", "batch.zip"), "batch.zip", buf.Bytes()))
	waitStatus(t, keyAcme, id, "Results")
	res := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), keyAcme, nil, ""))
	if res.code != http.StatusOK || res.header.Get("Content-Type") != "application/zip" {
		t.Fatalf("results: %d %s", res.code, res.header.Get("Content-Type"))
	}
	if cd := res.header.Get("Content-Disposition"); cd != fmt.Sprintf("attachment; filename=batch-%d-results.zip", id) {
		t.Errorf("Content-Disposition %q", cd)
	}
	zr, err := zip.NewReader(bytes.NewReader(res.body), int64(len(res.body)))
	if err != nil || len(zr.File) != 1 {
		t.Fatalf("result is not a one-file zip: %v", err)
	}
	f, _ := zr.File[0].Open()
	content, _ := io.ReadAll(f)
	if !strings.HasPrefix(string(content), "email\tev_status") || !strings.Contains(string(content), "john@example.com\tvalid\t10\tbiz") {
		t.Errorf("zip content %q", content)
	}
}

// TestRawCSVBody: the raw text/csv form of the upload.
func TestRawCSVBody(t *testing.T) {
	r := do(t, newRequest(t, http.MethodPost, "/v5/list?name=raw.csv&delimiter=%2C", keyAcme, []byte("a@example.com\n"), "text/csv"))
	id := listID(t, r)
	waitStatus(t, keyAcme, id, "Results")
}
