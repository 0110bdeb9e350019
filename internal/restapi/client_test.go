package restapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/emaildata/emaildata/internal/restapi"
)

var router routers.Router

func loadOpenAPI() error {
	doc, err := openapi3.NewLoader().LoadFromData(restapi.OpenAPI)
	if err != nil {
		return fmt.Errorf("load openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return fmt.Errorf("openapi.json is invalid: %w", err)
	}
	doc.Servers = nil // match any host
	router, err = gorillamux.NewRouter(doc)
	// GET /v5/td?format=html: validated as a string, like text/plain.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)
	return err
}

func httpGet(u, key string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("api_key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   []byte
	closes bool // the server closes the connection after it (Connection: close)
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	return m
}

// do sends req and validates the response against openapi.json: every
// response the tests see is checked against the document.
func do(t *testing.T, req *http.Request) response {
	t.Helper()
	return doWith(t, http.DefaultClient, req)
}

// doWith is do through the client cl.
func doWith(t *testing.T, cl *http.Client, req *http.Request) response {
	t.Helper()
	var reqBody []byte
	if req.Body != nil && req.GetBody != nil {
		rc, _ := req.GetBody()
		reqBody, _ = io.ReadAll(rc)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id", req.Method, req.URL.Path)
	}
	validate(t, req, reqBody, resp, body)
	return response{code: resp.StatusCode, header: resp.Header, body: body, closes: resp.Close}
}

func validate(t *testing.T, req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	t.Helper()
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		if resp.StatusCode == http.StatusMethodNotAllowed {
			return // the document lists what exists; a wrong method is ours to refuse
		}
		t.Errorf("%s %s: not in openapi.json: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true},
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s -> %d does not match openapi.json: %v\nbody: %.300s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
}

// newRequest builds a request to the API with the key in the api_key header.
func newRequest(t *testing.T, method, path, key string, body []byte, contentType string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, baseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("api_key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	return req
}

// multipartFile builds a multipart body with the file in the part "file".
func multipartFile(t *testing.T, name string, data []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(data)
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// submit uploads a list as multipart and returns the response.
func submit(t *testing.T, key string, q url.Values, name string, data []byte) response {
	t.Helper()
	body, ct := multipartFile(t, name, data)
	if q == nil {
		q = url.Values{}
	}
	return do(t, newRequest(t, http.MethodPost, "/v5/list?"+q.Encode(), key, body, ct))
}

func listID(t *testing.T, r response) int64 {
	t.Helper()
	if r.code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	return int64(r.json(t)["list_id"].(float64))
}

// waitStatus polls GET /v5/list/{id} until the status is want.
func waitStatus(t *testing.T, key string, id int64, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last map[string]any
	for time.Now().Before(deadline) {
		r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d", id), key, nil, ""))
		if r.code != http.StatusOK {
			t.Fatalf("status: %d %s", r.code, r.body)
		}
		last = r.json(t)
		if last["status"] == want {
			return last
		}
		if last["status"] == "Failed" && want != "Failed" {
			t.Fatalf("list failed: %v", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("list %d did not reach %s; last %v", id, want, last)
	return nil
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

var _ = strings.Contains
