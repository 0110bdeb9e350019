package smtpprobe

import (
	"container/list"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// HostState is what a Prober has learnt about one MX host address
// (ip:port) from the host's own answers. A zero field means nothing learnt:
// the Config's value applies. Limits only ever go down, so two learners
// merging their lessons (see Merge) agree whatever the order.
type HostState struct {
	// RcptsPerTransaction: the host answered "452 4.5.3 too many
	// recipients" after this many RCPTs of one transaction (its
	// smtpd_recipient_limit, recipients_max, MaxRecipientsPerMessage).
	RcptsPerTransaction int
	// RcptsPerSession: the host refused (452 at the first RCPT of a new
	// transaction) or dropped the session after this many RCPTs.
	RcptsPerSession int
	// RejectsPerSession: the host held its replies back (Postfix's
	// smtpd_soft_error_limit) or closed with "too many errors" after one
	// more rejection than this.
	RejectsPerSession int
	// RejectsPerTransaction: the host began holding its replies back once
	// a transaction had at most this many refused recipients (a
	// bad-recipient throttle that a new transaction resets): transactions
	// hold no more RCPTs than that may refuse.
	RejectsPerTransaction int
	// NonmailPerSession: the host dropped the session at the RSET after
	// this many (Exim's smtp_accept_max_nonmail, met on a server whose
	// greeting does not say Exim).
	NonmailPerSession int
	// Conns and ConnRate are the concurrent sessions and new connections a
	// second the host takes, lowered each time it asked to slow down (a
	// 421 or other 4xx greeting or session-level reply, a refused
	// connection after an earlier session).
	Conns    int
	ConnRate float64
	// ConnsPerWindow: the host refused a connection after accepting this
	// many within Config.RefusalWindow, as Postfix's anvil does once a
	// client exceeds smtpd_client_connection_rate_limit in its fixed
	// windows: no more than this many a window from then on.
	ConnsPerWindow int
	// Answered: the host has sent an SMTP reply before. A host that has
	// answered and then refuses or drops connections is busy, not dead.
	Answered bool
	// ErrorSleep: the host held its replies back this long each once a
	// session had made RejectsPerSession+1 errors (Postfix's
	// smtpd_error_sleep_time); HardErrors: it closed a session with "too
	// many errors" after this many (smtpd_hard_error_limit). With both,
	// the cost model (cost.go) may plan sessions past the quiet budget.
	// They stay in this process's memory: the fleet does not share them.
	ErrorSleep time.Duration
	HardErrors int
	// ReputationAfter and ReputationDelay: the host slowed every reply
	// to an egress identity by ReputationDelay, in every session from
	// then on, once that identity had sent it ReputationAfter unknown
	// recipients (a reputation or karma plugin; see reputation.go).
	ReputationAfter int
	ReputationDelay time.Duration
}

// Merge returns s with o's lessons added: for each limit the lower of the
// two known values, Answered if either has it.
func (s HostState) Merge(o HostState) HostState {
	low := func(a, b int) int {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	s.RcptsPerTransaction = low(s.RcptsPerTransaction, o.RcptsPerTransaction)
	s.RcptsPerSession = low(s.RcptsPerSession, o.RcptsPerSession)
	s.RejectsPerSession = low(s.RejectsPerSession, o.RejectsPerSession)
	s.RejectsPerTransaction = low(s.RejectsPerTransaction, o.RejectsPerTransaction)
	s.NonmailPerSession = low(s.NonmailPerSession, o.NonmailPerSession)
	s.Conns = low(s.Conns, o.Conns)
	s.ConnsPerWindow = low(s.ConnsPerWindow, o.ConnsPerWindow)
	if s.ConnRate == 0 || (o.ConnRate != 0 && o.ConnRate < s.ConnRate) {
		s.ConnRate = o.ConnRate
	}
	s.Answered = s.Answered || o.Answered
	s.HardErrors = low(s.HardErrors, o.HardErrors)
	s.ErrorSleep = max(s.ErrorSleep, o.ErrorSleep) // a cost: the larger is the safer guess
	s.ReputationAfter = low(s.ReputationAfter, o.ReputationAfter)
	s.ReputationDelay = max(s.ReputationDelay, o.ReputationDelay)
	return s
}

// HostMemory keeps the learnt state of MX host addresses for a Prober: the
// state outlives a host's queue (swept when idle), and all calls of the
// Prober share it. The default (Config.HostMemory nil) is in memory; a
// store shared by several processes can take its place, as long as Learn
// merges (HostState.Merge) rather than overwrites. The Prober calls both
// methods under its scheduler lock, when a host queue is created and when
// a lesson is learnt: a remote store must answer from a local copy and
// send lessons on in the background.
type HostMemory interface {
	// Load returns what is known of addr (the zero HostState if nothing).
	Load(addr string) HostState
	// Learn merges s into addr's state and returns the result.
	Learn(addr string, s HostState) HostState
}

// memHostMemory is the default HostMemory: a bounded LRU whose entries
// expire ttl after they last learnt something.
type memHostMemory struct {
	size int
	ttl  time.Duration
	now  func() time.Time

	mu  sync.Mutex
	m   map[string]*list.Element
	lru list.List // front = most recently learnt; values *hostMemEntry
}

type hostMemEntry struct {
	addr    string
	s       HostState
	expires time.Time
}

// NewHostMemory returns an in-memory HostMemory of at most size hosts whose
// lessons are forgotten ttl after the last one on clk (nil: the wall clock).
func NewHostMemory(size int, ttl time.Duration, clk clock.Clock) HostMemory {
	return &memHostMemory{size: max(1, size), ttl: ttl, now: clock.Or(clk).Now, m: make(map[string]*list.Element)}
}

func (h *memHostMemory) Load(addr string) HostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[addr]
	if e == nil {
		return HostState{}
	}
	v := e.Value.(*hostMemEntry)
	if !h.now().Before(v.expires) {
		h.lru.Remove(e)
		delete(h.m, addr)
		return HostState{}
	}
	return v.s
}

func (h *memHostMemory) Learn(addr string, s HostState) HostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if e := h.m[addr]; e != nil {
		v := e.Value.(*hostMemEntry)
		if now.Before(v.expires) {
			s = v.s.Merge(s)
		}
		v.s, v.expires = s, now.Add(h.ttl)
		h.lru.MoveToFront(e)
		return s
	}
	for h.lru.Len() >= h.size {
		old := h.lru.Back()
		h.lru.Remove(old)
		delete(h.m, old.Value.(*hostMemEntry).addr)
	}
	h.m[addr] = h.lru.PushFront(&hostMemEntry{addr: addr, s: s, expires: now.Add(h.ttl)})
	return s
}
