// Package console serves the web console: static files embedded in the
// binary (go:embed), so that the API Deployment serves it with nothing more
// to install, offline and in an air-gapped cluster. The files are plain ES
// modules with no build step (docs/architecture.md says why); the console
// talks to the public REST routes only, from the same origin.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

//go:embed static
var static embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// ContentSecurityPolicy allows the console's own files and calls to its
// own origin only: no inline script or style, no third-party origin, no
// framing, no form posting elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// SecurityHeaders sets the headers every console answer carries.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

// asset is one file, ready to serve.
type asset struct {
	body, gz []byte
	ctype    string
	etag     string
}

// Handler serves the console under Prefix. The files carry no key data:
// they are cached, but revalidated (ETag), so that an upgrade shows at once.
type Handler struct{ assets map[string]*asset }

// New reads the embedded files, adds codes.json (the status codes in
// plain words, from the verification engine's own table) and compresses
// each once.
func New() (*Handler, error) {
	h := &Handler{assets: map[string]*asset{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		h.add(strings.TrimPrefix(p, "static/"), b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	codes, err := json.Marshal(CodeTable())
	if err != nil {
		return nil, err
	}
	h.add("codes.json", codes)
	return h, nil
}

func (h *Handler) add(name string, body []byte) {
	sum := sha256.Sum256(body)
	a := &asset{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	if a.ctype = mime.TypeByExtension(path.Ext(name)); a.ctype == "" {
		a.ctype = "application/octet-stream"
	}
	if path.Ext(name) == ".js" {
		a.ctype = "text/javascript; charset=utf-8" // whatever the system's mime table says
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if buf.Len() < len(body) {
		a.gz = buf.Bytes()
	}
	h.assets[name] = a
}

// Names lists the files served (tests walk them).
func (h *Handler) Names() []string {
	out := make([]string, 0, len(h.assets))
	for n := range h.assets {
		out = append(out, n)
	}
	return out
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	a, ok := h.assets[name]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	hd.Set("Vary", "Accept-Encoding")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", a.ctype)
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		body = a.gz
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, q, _ := strings.Cut(strings.TrimSpace(part), ";"); strings.TrimSpace(enc) == "gzip" && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}

// Code is one status code of codes.json.
type Code struct {
	Status  string `json:"status"`
	Meaning string `json:"meaning"`
}

// CodeTable is every status code the verification engine names, by its
// number, with its status word and meaning: the engine's table is the one
// source, so the console explains exactly the codes a list can report.
func CodeTable() map[string]Code {
	out := map[string]Code{}
	for c := verify.Code(0); c < 1000; c++ {
		meaning := c.String()
		if strings.HasPrefix(meaning, "Code(") {
			continue // not a code the engine gives
		}
		out[strconv.Itoa(int(c))] = Code{Status: string(c.Status()), Meaning: meaning}
	}
	return out
}
