package mailworld

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// host is one SMTP endpoint: an MX host on its own loopback IP, or a
// refusing address (PrimaryDown host, NullMX sink).
type host struct {
	name  string
	ip    netip.Addr
	pref  uint16
	group *group // nil for a NullMX sink
	down  bool

	ln     net.Listener // nil when down
	closer io.Closer    // bound, non-listening socket when down

	cur, maxCur, total, rejected      atomic.Int64
	ehlo, mail, rcpt, rset, dataCmd   atomic.Int64
	slowed, tooManyErrors             atomic.Int64
	sent421, flowDelays, nonmailDrops atomic.Int64

	// recent: the times of the last connections accepted, for the most
	// new connections within one second (maxRate).
	rateMu  sync.Mutex
	recent  []time.Time
	maxRate int

	// anvil: connections per client IP in the current fixed window
	// (ConnRateLimit).
	anvilMu sync.Mutex
	anvil   map[string]*anvilCount
	// unknowns: the unknown recipients each client address sent
	// (ReputationDelay), under anvilMu.
	unknowns map[string]int
	// clients: the connections each client address holds open
	// (ClientConns), under anvilMu.
	clients map[string]int
}

// holdClient counts a connection of ip and reports whether it is within
// limit at once (0: no limit); release must be called either way.
func (h *host) holdClient(ip string, limit int) (ok bool, release func()) {
	if limit <= 0 {
		return true, func() {}
	}
	h.anvilMu.Lock()
	defer h.anvilMu.Unlock()
	if h.clients == nil {
		h.clients = make(map[string]int)
	}
	h.clients[ip]++
	n := h.clients[ip]
	return n <= limit, func() {
		h.anvilMu.Lock()
		defer h.anvilMu.Unlock()
		if h.clients[ip]--; h.clients[ip] == 0 {
			delete(h.clients, ip)
		}
	}
}

// markUnknown records that ip sent an unknown recipient.
func (h *host) markUnknown(ip string) {
	h.anvilMu.Lock()
	defer h.anvilMu.Unlock()
	if h.unknowns == nil {
		h.unknowns = make(map[string]int)
	}
	h.unknowns[ip]++
}

// isBad reports whether ip has sent at least after unknown recipients.
func (h *host) isBad(ip string, after int) bool {
	h.anvilMu.Lock()
	defer h.anvilMu.Unlock()
	return h.unknowns[ip] >= max(1, after)
}

type anvilCount struct {
	start time.Time
	n     int
	times []time.Time // sliding: the attempts within the window
}

// countConn counts a connection from ip and reports whether it is within
// the host's rate limit: fixed windows of ConnRateWindow, the next one
// starting at the first connection after the last ended (Postfix's anvil).
// Sliding (Domain.ConnRateSliding): every attempt within the last window
// counts, refused ones too.
func (h *host) countConn(ip string, limit int, window time.Duration, sliding bool, now time.Time) bool {
	h.anvilMu.Lock()
	defer h.anvilMu.Unlock()
	if h.anvil == nil {
		h.anvil = make(map[string]*anvilCount)
	}
	a := h.anvil[ip]
	if sliding {
		if a == nil {
			a = &anvilCount{}
			h.anvil[ip] = a
		}
		keep := a.times[:0]
		for _, t := range a.times {
			if now.Sub(t) < window {
				keep = append(keep, t)
			}
		}
		a.times = append(keep, now)
		return len(a.times) <= limit
	}
	if a == nil || now.Sub(a.start) >= window {
		a = &anvilCount{start: now}
		h.anvil[ip] = a
	}
	a.n++
	return a.n <= limit
}

// noteConn records a new connection and the most seen within any second.
func (h *host) noteConn(now time.Time) {
	h.rateMu.Lock()
	defer h.rateMu.Unlock()
	keep := h.recent[:0]
	for _, t := range h.recent {
		if now.Sub(t) < time.Second {
			keep = append(keep, t)
		}
	}
	h.recent = append(keep, now)
	h.maxRate = max(h.maxRate, len(h.recent))
}

func (h *host) addr(port int) string {
	return net.JoinHostPort(h.ip.String(), strconv.Itoa(port))
}

// bind listens (or, for a down host, binds without listening) on h.ip:port
// and returns the port actually bound. On an in-memory network a down host
// binds nothing: connections where nobody listens are refused there.
func (h *host) bind(nw Network, port int) (int, error) {
	if h.down && nw != nil {
		return port, nil
	}
	if h.down {
		c, p, err := bindRefusing(h.ip, port)
		if err != nil {
			return 0, err
		}
		h.closer = c
		return p, nil
	}
	listen := net.Listen
	if nw != nil {
		listen = nw.Listen
	}
	ln, err := listen("tcp4", h.addr(port))
	if err != nil {
		return 0, err
	}
	h.ln = ln
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (h *host) close() {
	if h.ln != nil {
		h.ln.Close()
	}
	if h.closer != nil {
		h.closer.Close()
	}
}

func (h *host) snapshot(port int) HostStats {
	return HostStats{
		Host:          h.name,
		Addr:          h.addr(port),
		Down:          h.down,
		Current:       int(h.cur.Load()),
		MaxConcurrent: int(h.maxCur.Load()),
		MaxPerSecond:  h.rate(),
		Total:         int(h.total.Load()),
		Rejected:      int(h.rejected.Load()),
		EHLO:          int(h.ehlo.Load()),
		MAIL:          int(h.mail.Load()),
		RCPT:          int(h.rcpt.Load()),
		RSET:          int(h.rset.Load()),
		DATA:          int(h.dataCmd.Load()),
		Slowed:        int(h.slowed.Load()),
		TooManyErrors: int(h.tooManyErrors.Load()),
		Sent421:       int(h.sent421.Load()),
		FlowDelays:    int(h.flowDelays.Load()),
		NonmailDrops:  int(h.nonmailDrops.Load()),
		Unknowns:      h.unknownCounts(),
	}
}

func (h *host) unknownCounts() map[string]int {
	h.anvilMu.Lock()
	defer h.anvilMu.Unlock()
	if len(h.unknowns) == 0 {
		return nil
	}
	out := make(map[string]int, len(h.unknowns))
	for ip, n := range h.unknowns {
		out[ip] = n
	}
	return out
}

func (h *host) reset() {
	for _, c := range []*atomic.Int64{&h.total, &h.rejected, &h.ehlo, &h.mail, &h.rcpt, &h.rset, &h.dataCmd, &h.slowed, &h.tooManyErrors,
		&h.sent421, &h.flowDelays, &h.nonmailDrops} {
		c.Store(0)
	}
	h.maxCur.Store(h.cur.Load())
	h.rateMu.Lock()
	h.recent, h.maxRate = nil, 0
	h.rateMu.Unlock()
	h.anvilMu.Lock()
	h.anvil = nil
	h.anvilMu.Unlock()
}

func (h *host) rate() int {
	h.rateMu.Lock()
	defer h.rateMu.Unlock()
	return h.maxRate
}

func storeMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// bindSMTP binds every host on one shared port, retrying with another port
// when SMTPPort is 0 and some IP already has the kernel-chosen one in use.
func (w *World) bindSMTP() error {
	if len(w.hosts) == 0 {
		w.port = w.opts.SMTPPort
		return nil
	}
	tries := 1
	first := w.opts.SMTPPort
	switch {
	case first == 0 && w.opts.Network != nil:
		first = 25 // every host has its own IP and nothing else binds there
	case first == 0:
		tries = 50
	}
	var lastErr error
	for try := 0; try < tries; try++ {
		port := first
		var err error
		for _, h := range w.hosts {
			var p int
			if p, err = h.bind(w.opts.Network, port); err != nil {
				break
			}
			port = p
		}
		if err == nil {
			w.port = port
			return nil
		}
		lastErr = err
		for _, h := range w.hosts {
			h.close()
			h.ln, h.closer = nil, nil
		}
	}
	return fmt.Errorf("mailworld: binding SMTP hosts: %w", lastErr)
}

func (w *World) acceptLoop(h *host) {
	defer w.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			select {
			case <-w.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// e.g. EMFILE: back off instead of spinning
			select {
			case <-w.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !w.track(c) {
			c.Close()
			return
		}
		w.wg.Add(1)
		go w.serve(h, c)
	}
}

func (w *World) track(c net.Conn) bool {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	select {
	case <-w.done:
		return false
	default:
	}
	w.conns[c] = struct{}{}
	return true
}

func (w *World) untrack(c net.Conn) {
	w.connMu.Lock()
	delete(w.conns, c)
	w.connMu.Unlock()
}
