package restapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// SlowBodyError is the error a request body's Read returns once the body
// has fallen behind ThrottleConfig.BodyMinRate for longer than
// ThrottleConfig.BodyStall. The connection's read deadline has passed: the
// request's context is cancelled and nothing more can be read.
type SlowBodyError struct {
	MinRate  int64
	Stall    time.Duration
	Received int64 // bytes of the body received
}

func (e *SlowBodyError) Error() string {
	return fmt.Sprintf("the request body fell behind the minimum rate of %d bytes a second for more than %s "+
		"(%d bytes received): the upload was stopped", e.MinRate, e.Stall, e.Received)
}

// isSlowBody reports whether err is, or wraps, a *SlowBodyError (a
// multipart reader wraps it).
func isSlowBody(err error) bool {
	var e *SlowBodyError
	return errors.As(err, &e)
}

// slowBodyMessage is the client's message for a slow body: the error's own,
// without what a reader wrapped around it.
func slowBodyMessage(err error) string {
	var e *SlowBodyError
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}

// pacedBody reads a request body with a connection read deadline that
// moves with the bytes received: a token bucket counted in time. The body
// starts with stall of credit; waiting in Read spends it, and each byte
// received adds 1/minRate s, up to stall. Time the handler spends elsewhere
// (writing to the store) is not the client's and costs nothing: the
// deadline is set afresh before each Read. So a client keeping minRate may
// send for as long as it likes, one sending a byte every 10 s is cut after
// about stall, and a fast sender banks at most stall for a later pause.
// With minRate 0 it only watches for the body's end.
type pacedBody struct {
	body        io.ReadCloser
	minRate     int64
	stall       time.Duration
	now         func() time.Time      // wall time: the deadline is the kernel's
	setDeadline func(time.Time) error // the connection's read deadline
	done        func(eof bool)        // the body is over: read to its end, or not
	credit      time.Duration         // how long Read may still wait
	received    int64
	err         error // sticky: a slow body stays cut
	deadlineSet bool
}

func (b *pacedBody) paced() bool { return b.minRate > 0 && b.setDeadline != nil }

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.paced() {
		n, err := b.body.Read(p)
		if err != nil {
			b.done(err == io.EOF)
		}
		return n, err
	}
	start := b.now()
	if err := b.setDeadline(start.Add(b.credit)); err != nil {
		b.setDeadline = nil // the writer cannot (a test's recorder): read unpaced
	} else {
		b.deadlineSet = true
	}
	n, err := b.body.Read(p)
	b.received += int64(n)
	b.credit -= b.now().Sub(start)
	b.credit = min(b.stall, b.credit+time.Duration(int64(n)*int64(time.Second)/b.minRate))
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.err = &SlowBodyError{MinRate: b.minRate, Stall: b.stall, Received: b.received}
		b.done(false)
		return n, b.err
	case err == io.EOF:
		// The whole body is here: clear the deadline, or the server's
		// background read (which watches for the client going away while
		// the handler works) would time out and cancel the request.
		if b.deadlineSet {
			_ = b.setDeadline(time.Time{})
			b.deadlineSet = false
		}
		b.done(true)
	default:
		b.done(false)
	}
	return n, err
}

func (b *pacedBody) Close() error {
	b.done(false)
	return b.body.Close()
}

// bodyState is what the body middleware shares with authenticate: whether
// the request's body has been read to its end, and the upload slots the
// request holds until its body is over.
type bodyState struct {
	mu      sync.Mutex
	eof     bool
	release []func()
}

// over records the body's end (eof: read to it) and releases the request's
// upload slots, once.
func (st *bodyState) over(eof bool) {
	st.mu.Lock()
	rel := st.release
	st.release = nil
	st.eof = st.eof || eof
	st.mu.Unlock()
	for _, f := range rel {
		f()
	}
}

// hold adds an upload slot to release when the body is over.
func (st *bodyState) hold(release func()) {
	st.mu.Lock()
	st.release = append(st.release, release)
	st.mu.Unlock()
}

func (st *bodyState) readToEnd() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.eof
}

type bodyCtxKey struct{}

// bodyStateFrom is the request's body state; nil for a request without a body.
func bodyStateFrom(ctx context.Context) *bodyState {
	st, _ := ctx.Value(bodyCtxKey{}).(*bodyState)
	return st
}

// drainGrace is how long the server may go on reading a body it answered
// before reading it to its end (a refused key, a 413): time for 256 KiB at
// 128 KiB/s.
const drainGrace = 2 * time.Second

// bodies paces every request body (pacedBody) and, when the server answers
// before a body has been read to its end (a refused key, a 429, a 413),
// closes the connection rather than reading on: the rest of a slow body
// would otherwise hold it. An upload is over, and its slots free, when its
// body has been read, has failed, or the server answers. Requests without
// a body pass untouched.
func (s *Server) bodies(next http.Handler) http.Handler {
	t := s.cfg.Throttle
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		st := &bodyState{}
		defer st.over(false)
		rc := http.NewResponseController(w)
		pb := &pacedBody{body: r.Body, done: st.over}
		if t.BodyMinRate > 0 && t.BodyStall > 0 {
			pb.minRate, pb.stall, pb.credit = t.BodyMinRate, t.BodyStall, t.BodyStall
			pb.now, pb.setDeadline = time.Now, rc.SetReadDeadline
		}
		r.Body = pb
		r = r.WithContext(context.WithValue(r.Context(), bodyCtxKey{}, st))
		next.ServeHTTP(&answerWriter{ResponseWriter: w, st: st}, r)
		if !st.readToEnd() {
			// After the handler the server drains up to 256 KiB of an
			// unread body (more, it closes at once), without a deadline: a
			// client that never sends it would hold the connection. The
			// drain lets a client that sent its whole body read the answer
			// (closing on unread bytes resets the connection, and the
			// answer with it); drainGrace bounds it for one that did not.
			_ = rc.SetReadDeadline(time.Now().Add(min(drainGrace, t.BodyStall)))
		}
	})
}

// answerWriter ends the request's upload when the answer starts, and asks
// for the connection to be closed when the body has not been read to its
// end.
type answerWriter struct {
	http.ResponseWriter
	st      *bodyState
	started bool
}

func (a *answerWriter) start() {
	if a.started {
		return
	}
	a.started = true
	if !a.st.readToEnd() {
		a.ResponseWriter.Header().Set("Connection", "close")
	}
	a.st.over(false)
}

func (a *answerWriter) WriteHeader(code int) {
	if code >= 200 { // not an informational answer
		a.start()
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(p []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// uploads counts the request bodies each key and each tenant is sending.
// Entries exist only while a body is in flight, so the maps hold no more
// than the server's open requests.
type uploads struct {
	perKey, perTenant int // <= 0: no cap

	mu       sync.Mutex
	byKey    map[string]int
	byTenant map[string]int
}

func newUploads(perKey, perTenant int) *uploads {
	return &uploads{perKey: perKey, perTenant: perTenant, byKey: map[string]int{}, byTenant: map[string]int{}}
}

// acquire takes a slot for key and tenant. It returns the release, or
// which cap is reached ("key" or "tenant") and that cap.
func (u *uploads) acquire(key, tenant string) (release func(), full string, limit int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.perKey > 0 && u.byKey[key] >= u.perKey:
		return nil, "key", u.perKey
	case u.perTenant > 0 && u.byTenant[tenant] >= u.perTenant:
		return nil, "tenant", u.perTenant
	}
	u.byKey[key]++
	u.byTenant[tenant]++
	var once sync.Once
	return func() { once.Do(func() { u.release(key, tenant) }) }, "", 0
}

func (u *uploads) release(key, tenant string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	dec := func(m map[string]int, k string) {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	dec(u.byKey, key)
	dec(u.byTenant, tenant)
}

// inFlight is the number of bodies key and tenant are sending.
func (u *uploads) inFlight(key, tenant string) (int, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byKey[key], u.byTenant[tenant]
}
