package evhistory

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
)

// relay forwards TCP to Redis until cut; restore listens again on the
// same port: a backend that goes away mid-list and comes back.
type relay struct {
	addr  string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func (r *relay) serve(t *testing.T) {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.ln, r.addr = ln, ln.Addr().String()
	r.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", "127.0.0.1:6379")
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, in, out)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ln.Close()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// The history going away mid-list loses nothing and trusts nothing: the
// engine probes while it cannot read, and uses it again once it answers.
func TestEngineThroughHistoryOutage(t *testing.T) {
	be := redisBackend(t) // skips (fails under CI) without Redis
	r := &relay{addr: "127.0.0.1:0"}
	r.serve(t)
	defer r.cut()
	url := strings.Replace(be.url, "127.0.0.1:6379", r.addr, 1)
	ctx := context.Background()
	h, err := Open(ctx, url, Options{TTLs: DefaultTTLs(), Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ck := &checker{answer: map[string]verify.Code{"ann@example.test": verify.CodeDeliverable, "ben@example.test": verify.CodeMailboxNotFound}}
	e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}}
	addrs := []string{"ann@example.test", "ben@example.test"}
	res := make([]verify.Result, 2)
	opts := verify.Options{SMTP: true, Tenant: "api/acme"}
	run := func() []string {
		t.Helper()
		if err := e.VerifyBatch(ctx, addrs, res, opts); err != nil {
			t.Fatal(err)
		}
		if res[0].Code != verify.CodeDeliverable || res[1].Code != verify.CodeMailboxNotFound {
			t.Fatalf("wrong verdicts: %+v", res)
		}
		return ck.take()
	}
	run()
	if got := run(); len(got) != 0 {
		t.Fatalf("probed %v with the history up", got)
	}
	r.cut()
	if got := run(); len(got) != 2 || res[0].FromHistory {
		t.Errorf("with the history away: probed %v, want both (nothing trusted unread)", got)
	}
	if h.Stats().Errors == 0 {
		t.Error("no errors counted")
	}
	r.serve(t) // the same port again: the client reconnects on its own time
	realtime.Eventually(t, 5*time.Second, "the history used again after it came back", func() bool {
		return len(run()) == 0 && res[0].FromHistory
	})
}
