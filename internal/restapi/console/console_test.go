package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestCodeTable: codes.json explains the codes of the spec's table in the
// engine's words, with their status.
func TestCodeTable(t *testing.T) {
	codes := CodeTable()
	for code, status := range map[string]string{"50": "safetosend", "20": "valid", "45": "valid", "155": "invalid", "400": "invalid", "525": "trap"} {
		c, ok := codes[code]
		if !ok || c.Status != status || c.Meaning == "" || strings.HasPrefix(c.Meaning, "Code(") {
			t.Errorf("code %s: %+v, want status %s and a meaning", code, c, status)
		}
	}
	if _, ok := codes["1"]; ok {
		t.Error("code 1 is no code of the engine, but is listed")
	}
}

// inline finds what the Content-Security-Policy forbids or the console
// must not hold: inline script, style attributes or elements, event
// handler attributes, and references to other origins.
var inline = []struct {
	what string
	re   *regexp.Regexp
}{
	{"an inline script", regexp.MustCompile(`<script(?:\s+type="module")?\s*>`)},
	{"a style element", regexp.MustCompile(`<style`)},
	{"a style attribute", regexp.MustCompile(`\sstyle\s*=`)},
	{"an event handler attribute", regexp.MustCompile(`<[^>]+\son[a-z]+\s*=`)},
	{"another origin", regexp.MustCompile(`(?:src|href|action)\s*=\s*["']?(?:https?:)?//|(?:fetch|open|import)\s*\(\s*['"](?:https?:)?//|url\(\s*['"]?(?:https?:)?//`)},
	{"setAttribute('style')", regexp.MustCompile(`setAttribute\(\s*['"]style`)},
	{"a console log (keys must never reach one)", regexp.MustCompile(`console\.(?:log|info|debug)`)},
}

func TestAssetsStrict(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range h.Names() {
		body := string(h.assets[name].body)
		for _, c := range inline {
			if loc := c.re.FindStringIndex(body); loc != nil {
				t.Errorf("%s holds %s: %q", name, c.what, body[loc[0]:min(loc[1]+40, len(body))])
			}
		}
	}
}

// TestServe: each file with its type, the security headers, gzip when
// asked, revalidation by ETag, and 404 for what is not there.
func TestServe(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, ctype string
		code        int
	}{
		{"/console/", "text/html; charset=utf-8", 200},
		{"/console/app.js", "text/javascript; charset=utf-8", 200},
		{"/console/app.css", "text/css; charset=utf-8", 200},
		{"/console/codes.json", "application/json", 200},
		{"/console/nope.js", "", 404},
		{"/console/../server.go", "", 404},
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		req.Header.Set("Accept-Encoding", "gzip, br")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		hd := rec.Header()
		if rec.Code != c.code || c.ctype != "" && hd.Get("Content-Type") != c.ctype {
			t.Errorf("%s: %d %q, want %d %q", c.path, rec.Code, hd.Get("Content-Type"), c.code, c.ctype)
		}
		if hd.Get("Content-Security-Policy") != ContentSecurityPolicy || hd.Get("X-Frame-Options") != "DENY" || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: security headers %v", c.path, hd)
		}
		if c.code != 200 {
			continue
		}
		if c.path != "/console/codes.json" && hd.Get("Content-Encoding") != "gzip" {
			t.Errorf("%s: not compressed for a client that takes gzip", c.path)
		}
		again := httptest.NewRequest(http.MethodGet, c.path, nil)
		again.Header.Set("If-None-Match", hd.Get("ETag"))
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, again)
		if rec.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", c.path, rec.Code)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("CSP %q lacks %q", ContentSecurityPolicy, want)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe") {
		t.Errorf("CSP %q allows something unsafe", ContentSecurityPolicy)
	}
}

// firstLoad are the files the console's first page loads (codes.json
// waits for a result view).
var firstLoad = []string{"index.html", "app.css", "app.js", "api.js", "preview.js", "chart.js", "favicon.svg"}

// TestFirstLoadSize: the first page is under 200 kB transferred (gzip,
// as a browser asks for it).
func TestFirstLoadSize(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	total, raw := 0, 0
	for _, name := range firstLoad {
		a, ok := h.assets[name]
		if !ok {
			t.Fatalf("%s is not served", name)
		}
		raw += len(a.body)
		if a.gz != nil {
			total += len(a.gz)
		} else {
			total += len(a.body)
		}
	}
	t.Logf("first load: %d bytes transferred (gzip), %d uncompressed", total, raw)
	if total >= 200_000 {
		t.Errorf("first load %d bytes, want under 200 kB", total)
	}
}
