package restapi_test

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// gatedDomain is the test mail world's tarpit for the lists: the suite's
// list checker (routedBatch) holds every batch with an address there until
// the test lets it through, so that a list stays part done for as long as
// a test looks at it. Lists without such an address never wait.
const gatedDomain = "gated.test"

// batchGate holds the batches of gatedDomain's addresses.
type batchGate struct {
	mu     sync.Mutex
	tokens chan struct{} // nil: no test holds batches
}

var gate batchGate

// hold waits, when a test holds the gate and an address is in
// gatedDomain, until the test lets one batch through.
func (g *batchGate) hold(ctx context.Context, addrs []string) error {
	g.mu.Lock()
	tokens := g.tokens
	g.mu.Unlock()
	if tokens == nil || !anyInDomain(addrs, gatedDomain) {
		return nil
	}
	select {
	case <-tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func anyInDomain(addrs []string, domain string) bool {
	for _, a := range addrs {
		if strings.HasSuffix(strings.ToLower(strings.TrimSpace(a)), "@"+domain) {
			return true
		}
	}
	return false
}

// close holds gatedDomain's batches from now on; let(n) lets n through,
// and the returned open lets every one through (also when the test ends).
func (g *batchGate) close(t *testing.T) (let func(n int), open func()) {
	t.Helper()
	tokens := make(chan struct{}, 1024)
	g.mu.Lock()
	g.tokens = tokens
	g.mu.Unlock()
	var once sync.Once
	open = func() {
		once.Do(func() {
			g.mu.Lock()
			g.tokens = nil
			g.mu.Unlock()
			close(tokens) // the batches waiting go on
		})
	}
	t.Cleanup(open)
	return func(n int) {
		for range n {
			tokens <- struct{}{}
		}
	}, open
}
