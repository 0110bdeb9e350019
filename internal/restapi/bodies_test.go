package restapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/restapi"
)

// rawConn is an HTTP/1.1 exchange written by hand, so a test can send a
// request's head and as much of its body as it likes, when it likes.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	req  *http.Request // what validate checks the answer against
}

// openRaw sends the head of method target with headers and returns the
// open exchange. The connection gives up after 60 s: a bound on a broken
// server, far above any answer the tests wait for.
func openRaw(t *testing.T, base, method, target string, headers ...string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: api.test\r\n%s\r\n\r\n", method, target, strings.Join(headers, "\r\n"))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, base+target, nil)
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	return &rawConn{t: t, conn: conn, br: bufio.NewReader(conn), req: req}
}

func (c *rawConn) send(s string) error {
	_, err := io.WriteString(c.conn, s)
	return err
}

// answer reads the server's answer (validated against openapi.json unless
// it is informational) and its body.
func (c *rawConn) answer() response {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, c.req)
	if err != nil {
		c.t.Fatalf("%s %s: no answer: %v", c.req.Method, c.req.URL.Path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: answer's body: %v", c.req.Method, c.req.URL.Path, err)
	}
	if resp.StatusCode >= 200 {
		validate(c.t, c.req, nil, resp, body)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: body, closes: resp.Close}
}

// closedByServer says whether the server has closed the connection (or
// reset it): a read ends in an error, not the 60 s bound of openRaw.
func (c *rawConn) closedByServer() bool {
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestSlowBodyIsCut (issue 30, item 5): a body trickling a byte at a time,
// far under the minimum rate, is cut once its stall credit is spent, with
// 408 SlowUpload on each route that takes a body, and the connection is
// closed; before, it held the connection as long as the client liked.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel() // its own API; its time is the stalls' waits
	base := startThrottledAPI(t, restapi.Config{Throttle: restapi.ThrottleConfig{BodyStall: 500 * time.Millisecond}})
	id := listID(t, submit(t, keyAcme, nil, "purchase.csv", []byte("a@example.com\n")))
	for _, tc := range []struct {
		name, target, contentType, start string
		headers                          []string
		plain                            bool // a plain-text route: "Request timeout: ..."
	}{
		{name: "a raw list", target: "/v5/list", contentType: "text/csv", headers: []string{"api_key: " + keyAcme}},
		{name: "a multipart list", target: "/v5/list", contentType: "multipart/form-data; boundary=XX", headers: []string{"api_key: " + keyAcme},
			start: "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"l.csv\"\r\nContent-Type: text/csv\r\n\r\n"},
		{name: "a bulk body", target: "/v5/ei/bulk?api_key=" + keyDemo, contentType: "application/json", start: "[{"},
		{name: "a purchase", target: fmt.Sprintf("/v5/list/%d/purchase", id), contentType: "application/json", headers: []string{"api_key: " + keyAcme}, start: "{"},
		{name: "a feedback file", target: "/feedback/v1?api_key=" + keyFraud, contentType: "multipart/form-data; boundary=XX", plain: true,
			start: "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.tsv\"\r\n\r\nemail\tfraud_type\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a connection of its own, cut by its own stall
			headers := append([]string{"Content-Type: " + tc.contentType, "Content-Length: 100000"}, tc.headers...)
			c := openRaw(t, base, "POST", tc.target, headers...)
			if err := c.send(tc.start); err != nil {
				t.Fatal(err)
			}
			// A space every 50 ms (valid in each body so far): 20 bytes a
			// second, against 1024.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if c.send(" ") != nil {
							return
						}
					}
				}
			}()
			r := c.answer()
			kind := `"error":"SlowUpload"`
			if tc.plain {
				kind = "Request timeout: the request body fell behind"
			}
			if r.code != http.StatusRequestTimeout || !strings.Contains(string(r.body), kind) ||
				!strings.Contains(string(r.body), "fell behind the minimum rate of 1024 bytes a second for more than 500ms") {
				t.Fatalf("%d %s", r.code, r.body)
			}
			if !r.closes || !c.closedByServer() {
				t.Errorf("the connection stays open (Connection: close %v)", r.closes)
			}
		})
	}
}

// TestRefusedBodyIsAnsweredAtOnce: a request refused before its body is
// read (here an unknown key) is answered at once and its connection
// closed, whatever of the body has not come (after a grace of 2 s for the
// rest of it). Before, the answer came but the server then waited for the
// rest of a small body forever.
func TestRefusedBodyIsAnsweredAtOnce(t *testing.T) {
	t.Parallel() // a connection of its own; its time is the 2 s grace
	c := openRaw(t, baseURL, "POST", "/v5/list", "api_key: not-a-real-key-000000000", "Content-Type: text/csv", "Content-Length: 1000")
	if err := c.send("a@example.com\n"); err != nil {
		t.Fatal(err)
	}
	if r := c.answer(); r.code != http.StatusUnauthorized || !r.closes {
		t.Fatalf("%d Connection: close %v %s", r.code, r.closes, r.body)
	}
	if !c.closedByServer() {
		t.Error("the connection stays open")
	}
}

// TestRefusedBodyIsDrainedBeforeTheClose: a client sending a whole body
// the server refused before reading it (an unknown key) may finish sending
// it: the server reads the rest (up to 256 KiB, for at most 2 s) and then
// closes cleanly. Closing on unread bytes would reset the connection, and
// a client still sending could lose the answer; with the drain failed at
// once this test's read gets "connection reset by peer", not EOF.
func TestRefusedBodyIsDrainedBeforeTheClose(t *testing.T) {
	half := strings.Repeat("someone@example.com\n", 5_000) // 100,000 bytes
	c := openRaw(t, baseURL, "POST", "/v5/list", "api_key: not-a-real-key-000000000", "Content-Type: text/csv",
		fmt.Sprintf("Content-Length: %d", 2*len(half)))
	if err := c.send(half); err != nil {
		t.Fatal(err)
	}
	if r := c.answer(); r.code != http.StatusUnauthorized || !r.closes {
		t.Fatalf("%d Connection: close %v %s", r.code, r.closes, r.body)
	}
	if err := c.send(half); err != nil {
		t.Fatalf("sending the rest after the answer: %v", err)
	}
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("after the rest of the body: %v, want the server's clean close (EOF)", err)
	}
}

// TestSteadySlowUploadPasses: an upload on a slow link that keeps the
// minimum rate (5 KiB/s against 1 KiB/s, a chunk every 100 ms) goes through
// although it lasts four times the stall: the deadline grows with the
// bytes, it is not a bound on the whole body.
func TestSteadySlowUploadPasses(t *testing.T) {
	t.Parallel() // its own API; its time is the slow link's
	base := startThrottledAPI(t, restapi.Config{Throttle: restapi.ThrottleConfig{BodyStall: time.Second}})
	pr, pw := io.Pipe()
	const chunks = 40
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := range chunks {
			<-tick.C
			var b strings.Builder
			for b.Len() < 512-32 {
				fmt.Fprintf(&b, "user%d.%d@example.com\n", i, b.Len())
			}
			if _, err := io.WriteString(pw, b.String()); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", base+"/v5/list?service=email_validation&name=slow.csv", pr)
	req.Header.Set("api_key", keyAcme)
	req.Header.Set("Content-Type", "text/csv")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	t.Logf("%s after %v", body, time.Since(start).Round(time.Millisecond))
}

// holdUpload starts an upload of a raw 14-byte list with Expect:
// 100-continue and returns once the server asks for the body: it has
// taken the upload's slots by then (the key check comes first).
func holdUpload(t *testing.T, base, key string) *rawConn {
	t.Helper()
	c := openRaw(t, base, "POST", "/v5/list?service=email_validation", "api_key: "+key, "Content-Type: text/csv",
		"Content-Length: 14", "Expect: 100-continue")
	if r := c.answer(); r.code != http.StatusContinue {
		t.Fatalf("%s: %d %s, want 100 Continue", key, r.code, r.body)
	}
	return c
}

// TestUploadsAtOnce (issue 30, item 5): a key, and a tenant, may send so
// many bodies at once; past that a new one gets 429 with Retry-After, for
// that key or tenant only; a finished upload frees its slot.
func TestUploadsAtOnce(t *testing.T) {
	base := startThrottledAPI(t, restapi.Config{Throttle: restapi.ThrottleConfig{UploadsPerKey: 2, UploadsPerTenant: 3}})
	upload := func(key string) response {
		return do(t, requestTo(t, base, "POST", "/v5/list?service=email_validation", key, []byte("a@example.com\n"), "text/csv"))
	}
	held := []*rawConn{holdUpload(t, base, keyAcme), holdUpload(t, base, keyAcme)}
	wantAnswer(t, "a third upload of the key", upload(keyAcme), 429, "5",
		`too many uploads at once for this key (at most 2); retry once one of them has finished; retry after 5s`)
	held = append(held, holdUpload(t, base, keyMulti)) // acme's third
	wantAnswer(t, "a fourth upload of the tenant", upload(keyMulti), 429, "5", `too many uploads at once for this tenant (at most 3)`)
	if r := upload(keyGlobex); r.code != http.StatusAccepted {
		t.Fatalf("another tenant's upload: %d %s", r.code, r.body)
	}
	if r := do(t, requestTo(t, base, "GET", "/v5/list/999999999", keyAcme, nil, "")); r.code != http.StatusNotFound {
		t.Fatalf("a call without a body: %d %s", r.code, r.body)
	}
	// Finish one of the key's uploads: its slot is free once the body is in.
	if err := held[0].send("a@example.com\n"); err != nil {
		t.Fatal(err)
	}
	if r := held[0].answer(); r.code != http.StatusAccepted {
		t.Fatalf("the held upload: %d %s", r.code, r.body)
	}
	if r := upload(keyAcme); r.code != http.StatusAccepted {
		t.Fatalf("an upload after one finished: %d %s", r.code, r.body)
	}
}
