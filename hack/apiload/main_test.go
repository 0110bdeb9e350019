package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8080/v5/list/1": true,
		"http://127.9.9.9/":               true,
		"http://localhost:1/":             true,
		"https://LOCALHOST/":              true,
		"http://[::1]:8080/":              true,
		"":                                false,
		"127.0.0.1:8080":                  false, // no scheme
		"ftp://127.0.0.1/":                false,
		"http://10.0.0.1/":                false,
		"http://128.0.0.1/":               false,
		"http://example.com/":             false,
		"http://localhost.example.com/":   false,
		"http://[::2]/":                   false,
		"http://0.0.0.0/":                 false,
	} {
		if _, err := checkURL(raw); (err == nil) != ok {
			t.Errorf("checkURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:80": true, "[::1]:80": true, "192.168.1.1:80": false, "[2001:db8::1]:443": false} {
		if err := loopbackOnly("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("loopbackOnly(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * 100 * time.Microsecond) // 0.1 ms .. 100 ms
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.02 {
			t.Errorf("quantile(%v) = %s, want %s (+2%%)", c.q, got, c.want)
		}
	}
	if h.max != 100*time.Millisecond {
		t.Errorf("max %s", h.max)
	}
	// Bucket edges are monotonic and each value falls below its upper edge.
	prev := time.Duration(0)
	for us := uint64(0); us < 1<<24; us = us*17/16 + 1 {
		i := bucket(us)
		if u := upper(i); u <= time.Duration(us)*time.Microsecond || u < prev {
			t.Fatalf("value %dµs: bucket %d upper %s", us, i, u)
		}
		prev = upper(i)
	}
}

func TestWorker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("api_key") != "k" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	w := &worker{codes: map[int]int64{}}
	for range 3 {
		w.do(srv.Client(), req)
	}
	req.Header["api_key"] = []string{"k"}
	w.do(srv.Client(), req)
	if w.ok != 4 || w.codes[401] != 3 || w.codes[200] != 1 || w.hist.n != 4 {
		t.Errorf("worker %+v", w)
	}
}

func TestLoadTargets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.txt", "# comment\nhttp://127.0.0.1:1/a\n\n  http://localhost:1/b?x=1  \n")
	got, err := loadTargets("", good)
	if err != nil || len(got) != 2 || got[0].Path != "/a" || got[1].RawQuery != "x=1" {
		t.Fatalf("loadTargets(good) = %v, %v", got, err)
	}
	if got, err := loadTargets("http://127.0.0.1:1/", ""); err != nil || len(got) != 1 {
		t.Fatalf("-url: %v, %v", got, err)
	}
	for name, c := range map[string][2]string{
		"both":         {"http://127.0.0.1:1/", good},
		"neither":      {"", ""},
		"missing file": {"", filepath.Join(dir, "nope.txt")},
		"empty file":   {"", write("empty.txt", "# nothing\n\n")},
		"remote URL":   {"", write("remote.txt", "http://127.0.0.1:1/a\nhttp://example.com/\n")},
	} {
		if _, err := loadTargets(c[0], c[1]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
