package callback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// UserAgent identifies callback requests so receivers can recognise and
// filter them; bump the version if the payload changes incompatibly.
const UserAgent = "emaildata-callback/1"

const (
	// maxResponseRead caps how much of a receiver's response we read, so a
	// hostile receiver cannot make us buffer large bodies.
	maxResponseRead = 4 << 10
	// maxSnippet caps the part of a response body quoted in errors, which
	// end up in resource status.
	maxSnippet = 200
)

// defaultClient backs Deliver's nil client; shared so its connection pool is
// reused instead of leaking one per call.
var defaultClient = sync.OnceValue(func() *http.Client { return Policy{}.Client(DefaultTimeout) })

// Payload is the JSON body of a callback.
type Payload struct {
	ListID int64  `json:"list_id"`
	Status string `json:"status"`
	Name   string `json:"name"`
}

// StatusError reports a non-2xx response from the receiver.
type StatusError struct {
	// StatusCode is the HTTP status code received.
	StatusCode int
	// Snippet is a sanitised prefix of the response body, for diagnosis.
	Snippet string
	// RetryAfter is the receiver's Retry-After hint (0 if absent or
	// unparsable). It is untrusted input: cap it before honouring it.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "callback receiver responded with HTTP %d", e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		b.WriteString(" " + text)
	}
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		b.WriteString(" (redirects are not followed)")
	}
	if e.Snippet != "" {
		fmt.Fprintf(&b, ": %q", e.Snippet)
	}
	return b.String()
}

// Permanent reports whether repeating the same request is pointless:
// redirects and 4xx are permanent, except 408 Request Timeout and
// 429 Too Many Requests; 5xx is retryable.
func (e *StatusError) Permanent() bool {
	switch {
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusTooManyRequests:
		return false
	case e.StatusCode >= 500:
		return false
	default:
		return true
	}
}

// TransportError reports that no HTTP response was received (connection
// refused, timeout, TLS failure, cancelled context, ...). It is retryable.
type TransportError struct {
	Err error
}

func (e *TransportError) Error() string   { return "callback delivery failed: " + e.Err.Error() }
func (e *TransportError) Unwrap() error   { return e.Err }
func (e *TransportError) Permanent() bool { return false }

// IsPermanent reports whether err is a delivery failure that retrying cannot
// fix: a blocked destination, an invalid URL, a redirect, or a 4xx status
// other than 408 and 429. Everything else (5xx, 408, 429, network errors,
// timeouts) is worth retrying. nil is not permanent.
func IsPermanent(err error) bool {
	var pe interface{ Permanent() bool }
	if errors.As(err, &pe) {
		return pe.Permanent()
	}
	return false
}

// Deliver POSTs p as JSON to rawURL once, using c, which should come from
// Policy.Client: the SSRF protection lives in that client's dialer (a nil c
// means the default Policy's client). It makes exactly one attempt and never
// sleeps; retries are the caller's job (see Backoff).
//
// A 2xx response is success. Otherwise the error is a *StatusError,
// *BlockedError, *TransportError or an invalid-URL error; use IsPermanent to
// decide whether to retry. At most a few KiB of the response are read and
// only a short sanitised snippet appears in errors. Errors never repeat the
// URL, so query-string secrets do not leak into status or logs.
//
// The request is unsigned: DeliverSigned signs it.
func Deliver(ctx context.Context, c *http.Client, rawURL string, p Payload) error {
	return DeliverSigned(ctx, c, rawURL, p, Signing{})
}

// DeliverSigned is Deliver with the Standard Webhooks signature headers
// of s (none when s.Key is nil).
func DeliverSigned(ctx context.Context, c *http.Client, rawURL string, p Payload, s Signing) error {
	u, err := parseCallbackURL(rawURL)
	if err != nil {
		return err
	}
	if c == nil {
		c = defaultClient()
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding callback payload: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return invalidURLf("callback_url is not a valid URL: %v", unwrapURLError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	s.setHeaders(req.Header, body)

	resp, err := c.Do(req)
	if err != nil {
		var blocked *BlockedError
		if errors.As(err, &blocked) {
			return blocked
		}
		return &TransportError{Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	// Read a bounded amount so the snippet is available; the rest is
	// discarded by Close (the connection is then not reused, which is fine).
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseRead))

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &StatusError{
		StatusCode: resp.StatusCode,
		Snippet:    snippet(data),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), attemptTime(s)),
	}
}

// attemptTime is when the attempt was made on the caller's clock (the
// reconciler's: s.Time), which a Retry-After HTTP date is counted from;
// the wall clock for a caller that gave none.
func attemptTime(s Signing) time.Time {
	if s.Time.IsZero() {
		return clock.Wall{}.Now()
	}
	return s.Time
}

// unwrapURLError drops *url.Error's "Post \"<url>\": " prefix, which would
// copy the callback URL (and any token in its query) into error messages.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// snippet turns the start of a response body into a short single-line
// string that is safe to store in status and logs.
func snippet(data []byte) string {
	s := strings.ToValidUTF8(string(data), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxSnippet {
		cut := maxSnippet
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// parseRetryAfter understands both delay-seconds and HTTP-date forms.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 || secs > int64((1<<63-1)/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
