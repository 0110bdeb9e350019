package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8090/v5/list": true,
		"http://localhost/":             true,
		"http://[::1]:1/":               true,
		"":                              false,
		"https://127.0.0.1/":            false, // bodies are written by hand, in clear
		"http://10.0.0.1/":              false,
		"http://example.com/":           false,
	} {
		if _, err := checkURL(raw); (err == nil) != ok {
			t.Errorf("checkURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}

// TestUploadCountsTheAnswer: a slow upload the server cuts after a few
// bytes is counted under the server's status code.
func TestUploadCountsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("api_key") != "k1" {
			t.Errorf("api_key %q", r.Header.Get("api_key"))
		}
		_, _ = io.ReadFull(r.Body, make([]byte, 3))
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestTimeout)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/v5/list")
	o := &options{target: u, n: 1, every: time.Millisecond, contentLength: 100, keys: []string{"k1"}}
	st := &stats{answers: map[string]int{}, start: time.Now()}
	st.upload(context.Background(), o, 0)
	if st.answers["408"] != 1 || len(st.cutAfter) != 1 || st.open.Load() != 0 || st.held.Load() != 0 {
		t.Fatalf("answers %v, open %d, sending %d", st.answers, st.open.Load(), st.held.Load())
	}
}
