// Package s3test is a small S3-compatible server for tests: it serves
// GetObject and HeadObject (path-style) on 127.0.0.1 and checks each
// request's AWS Signature Version 4 against the one key pair it knows, so a
// test proves which credentials a client used. It counts the requests it
// served, so a test can also prove that nothing was read.
package s3test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Server is a running S3 test server.
type Server struct {
	URL string

	srv     *httptest.Server
	creds   aws.Credentials
	mu      sync.Mutex
	objects map[string][]byte // bucket/key
	reads   atomic.Int64
}

// New starts a server accepting the key pair (accessKey, secret).
func New(accessKey, secret string) *Server {
	s := &Server{creds: aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret}, objects: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Put stores an object.
func (s *Server) Put(bucket, key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[bucket+"/"+key] = append([]byte(nil), data...)
}

// Reads counts the signed requests for objects served so far.
func (s *Server) Reads() int64 { return s.reads.Load() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.fail(w, r, http.StatusNotImplemented, "NotImplemented", "only GetObject and HeadObject")
		return
	}
	if code, msg := s.checkSignature(r); code != "" {
		s.fail(w, r, http.StatusForbidden, code, msg)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	data, ok := s.objects[path]
	s.mu.Unlock()
	if !ok {
		s.fail(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	s.reads.Add(1)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
	w.Header().Set("ETag", `"0"`)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
	}
}

// checkSignature re-signs the request's signed headers with the known
// secret and compares the signatures.
func (s *Server) checkSignature(r *http.Request) (code, msg string) {
	auth := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return "AccessDenied", "request is not signed"
	}
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, algo), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] != s.creds.AccessKeyID {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "AccessDenied", "missing X-Amz-Date"
	}
	req, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	req.Host = r.Host
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" {
			continue
		}
		if h == "content-length" {
			req.ContentLength = r.ContentLength
		}
		for _, v := range r.Header.Values(h) {
			req.Header.Add(h, v)
		}
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), s.creds, req, r.Header.Get("X-Amz-Content-Sha256"), "s3", scope[2], when); err != nil {
		return "AccessDenied", err.Error()
	}
	if sig := signatureOf(req.Header.Get("Authorization")); sig == "" || sig != fields["Signature"] {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
	}
	return "", ""
}

func signatureOf(auth string) string {
	_, sig, _ := strings.Cut(auth, "Signature=")
	return sig
}
