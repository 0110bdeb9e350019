package smtpprobe

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
)

// item is one RCPT to get a verdict for: an address of a job, or the job's
// catch-all probe (idx -1). Items live in a host queue, in a session's
// window, or in the timer heap; every field is guarded by Prober.mu.
type item struct {
	job    *job
	idx    int
	addr   string
	tg     target // where it is queued or was last sent
	tries  int    // 4xx answers so far
	drops  int    // sessions lost with this item in flight
	due    time.Time
	since  time.Time // entered its current queue or the heap
	last   reply     // last temporary reply
	done   bool
	heapIx int
	// greyQ is the host whose greylisting it waits out in the timer heap
	// (hostQ.greyWaiting counts it), nil otherwise.
	greyQ *hostQ
	// sub marks a catch-all item that is not probed itself: it waits for
	// another job's probe of the same domain (see queueCatchAllLocked).
	sub bool
	// settled: the item ended without an answer of its own (context,
	// dead hosts, or no longer needed).
	settled bool
}

// Catch-all verdict of a job's domain.
type caState int

const (
	caUnknown caState = iota // not known, probe not queued
	caQueued                 // probe queued, deferred or in flight
	caNo
	caYes
	caInconclusive // probe gave no definite answer
)

// job is one Start call: addresses of one domain. Guarded by Prober.mu.
type job struct {
	p        *Prober
	domain   string
	targets  []target
	failed   []bool
	silent   []bool // failed target never answered (timed out)
	results  []Result
	items    []*item
	deadline time.Time // zero: none

	remaining int // items without a final verdict
	accepted  []bool
	nAccepted int
	ca        caState
	caItem    *item
	caWaiters []*item // other jobs' sub items waiting for caItem's verdict
	claimed   bool    // this job's probe holds the fleet-wide claim (claim.go)
	dead      error   // all targets failed
	overErr   error   // ctx ended: wraps context.Canceled or DeadlineExceeded
	finished  bool
	done      chan struct{}
	stop      func() bool // the ctx watcher
}

// target is one MX host address to connect to.
type target struct {
	host string // MX host name
	addr string // ip:port
	ip   string
	pref uint16
}

func (p *Prober) newJob(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, results []Result) *job {
	j := &job{p: p, domain: domain, results: results, accepted: make([]bool, len(addrs)), done: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		j.deadline = dl
	}
	hosts := slices.Clone(mx)
	slices.SortStableFunc(hosts, func(a, c mxdns.MXHost) int { return int(a.Pref) - int(c.Pref) })
	port := strconv.Itoa(p.cfg.Port)
	for _, h := range hosts {
		for _, a := range h.Addrs {
			j.targets = append(j.targets, target{host: h.Host, addr: net.JoinHostPort(a.String(), port), ip: a.String(), pref: h.Pref})
		}
	}
	j.failed = make([]bool, len(j.targets))
	j.silent = make([]bool, len(j.targets))
	for i, a := range addrs {
		results[i] = Result{}
		if !validRcpt(a) {
			results[i] = Result{Outcome: Unconfirmed, Err: fmt.Errorf("%w: %q", ErrBadAddress, truncate(a, 64))}
			continue
		}
		j.items = append(j.items, &item{job: j, idx: i, addr: a, heapIx: -1})
	}
	j.remaining = len(j.items)
	v, ok := p.cache.get(domain)
	if !ok && j.remaining > 0 {
		v, ok = p.sharedCatchAll(ctx, domain) // another process's verdict
	}
	if ok {
		p.st.caCached.Add(1)
		j.ca = caNo
		if v {
			j.ca = caYes
		}
	}
	if j.remaining > 0 {
		j.stop = context.AfterFunc(ctx, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !j.finished {
				j.abortLocked(&budgetError{ctxErr(ctx, j.p.clk)})
			}
		})
	}
	return j
}

// submit queues a new job's items.
func (p *Prober) submit(j *job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(j.targets) == 0 && j.remaining > 0 {
		j.dead = ErrNoHosts
	}
	if j.dead != nil {
		j.settleAllLocked(j.dead)
	}
	for _, it := range j.items {
		if !it.done {
			p.route(it, false)
		}
	}
	// A lone address with a deadline (an API call) takes the catch-all
	// probe with it: a round trip less. Other calls send the probe after
	// their first acceptance or deferral, since a "user unknown" for any
	// address of the domain shows it is no catch-all (noCatchAllLocked):
	// at a Postfix host every probe is one more rejection of its budget.
	if j.remaining == 1 && !j.deadline.IsZero() {
		j.queueCatchAllLocked(true)
	}
	j.finishIfDoneLocked()
}

// route queues it at one of its job's most preferred MX host addresses
// that have not failed (skipping remembered failures), or settles it when
// none is left.
func (p *Prober) route(it *item, front bool) {
	j := it.job
	for !it.done {
		ix := j.pick(it.addr)
		if ix < 0 {
			j.settleLocked(it, j.dead)
			return
		}
		tg := j.targets[ix]
		if err := p.allowed(tg); err != nil {
			j.targetFailedLocked(tg.addr, &hostError{tg: tg, err: err}, false)
			continue
		}
		if err := p.penalties.check(tg.addr); err != nil {
			p.st.skipped.Add(1)
			j.targetFailedLocked(tg.addr, &hostError{tg: tg, err: err}, silentErr(err))
			continue
		}
		it.tg = tg
		q := p.host(tg.addr)
		if q.lastRefusal != nil && p.clk.Now().Before(q.backoffUntil) && !p.canWaitLocked(q, it) {
			// The host asked to slow down, and this call cannot wait.
			j.refusedLocked(it, q.lastRefusal)
			return
		}
		p.enqueue(q, it, front)
		return
	}
}

// pick chooses among the live targets of the lowest preference (MX hosts
// of equal preference, and a host's several addresses) by a hash of the
// address: load is spread as publishers of such records intend, and an
// address keeps going to the same host, whose greylisting memory knows it.
// It returns -1 when every target failed.
func (j *job) pick(addr string) int {
	n, best := 0, -1
	for i, tg := range j.targets {
		switch {
		case j.failed[i]:
		case best < 0 || tg.pref < j.targets[best].pref:
			best, n = i, 1
		case tg.pref == j.targets[best].pref:
			n++
		}
	}
	if n <= 1 {
		return best
	}
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(addr)))
	k := int(h.Sum32() % uint32(n))
	for i := best; i < len(j.targets); i++ {
		if !j.failed[i] && j.targets[i].pref == j.targets[best].pref {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return best
}

// targetFailedLocked marks every target at addr failed for the job, and
// kills the job when none is left.
func (j *job) targetFailedLocked(addr string, err error, silent bool) {
	for i, tg := range j.targets {
		if tg.addr == addr && !j.failed[i] {
			j.failed[i], j.silent[i] = true, silent
		}
	}
	if j.dead == nil && !slices.Contains(j.failed, false) {
		j.dead = fmt.Errorf("%w: last: %w", ErrAllHostsFailed, err)
		j.settleAllLocked(j.dead)
	}
}

// neverAnswered reports whether every target failed without answering.
func (j *job) neverAnswered() bool {
	if len(j.targets) == 0 {
		return false
	}
	for i := range j.targets {
		if !j.failed[i] || !j.silent[i] {
			return false
		}
	}
	return true
}

func (j *job) settleAllLocked(err error) {
	for _, it := range j.items {
		j.settleLocked(it, err)
	}
}

// settleLocked gives an item without a verdict its outcome: Timeout when
// the caller's context is over or no host ever answered, else Unconfirmed.
func (j *job) settleLocked(it *item, err error) {
	if it.done {
		return
	}
	it.settled = true
	r := Result{Outcome: Unconfirmed, Err: err, Host: it.tg.host}
	if it.tries > 0 {
		r.Reply, r.Greylisted = it.last.last, looksGreylisted(it.last)
	}
	var he *hostError
	if errors.As(err, &he) {
		r.Host = he.tg.host
		if he.reply.code != 0 {
			r.Reply = he.reply.last
		}
	}
	if j.overErr != nil || (errors.Is(err, ErrAllHostsFailed) && j.neverAnswered()) {
		r.Outcome = Timeout
	}
	j.finalLocked(it, r)
}

// finalLocked records the verdict of an item.
func (j *job) finalLocked(it *item, r Result) {
	if it.done {
		return
	}
	it.done = true
	j.p.unheapLocked(it)
	j.remaining--
	if it.idx >= 0 {
		j.results[it.idx] = r
	} else {
		if j.ca == caQueued {
			j.ca = caInconclusive
		}
		j.caDoneLocked(it)
	}
	// Only the catch-all probe left, and nothing needs its verdict. A
	// probe claimed fleet-wide is kept: other processes may be waiting
	// for its verdict, and would start a probe (and its greylisting
	// window) of their own only once its claim is given up.
	if ca := j.caItem; ca != nil && !ca.done && !j.caNeeded() && !j.claimed {
		ca.settled = true
		j.finalLocked(ca, Result{})
	}
	j.finishIfDoneLocked()
}

// caDoneLocked hands the end of a job's own catch-all probe to the jobs
// waiting for it: its verdict, or, when it ended without one of its own,
// the task of probing themselves.
func (j *job) caDoneLocked(it *item) {
	p := j.p
	if it.sub {
		return
	}
	if p.caOwner[j.domain] == j {
		delete(p.caOwner, j.domain)
	}
	p.releaseClaimLocked(j)
	waiters := j.caWaiters
	j.caWaiters = nil
	for _, w := range waiters {
		wj := w.job
		if w.done {
			continue
		}
		if !it.settled {
			wj.ca = j.ca
			wj.finalLocked(w, Result{})
			continue
		}
		w.done = true
		wj.ca, wj.caItem = caUnknown, nil
		if wj.nAccepted > 0 || wj.remaining > 1 {
			wj.queueCatchAllLocked(true)
		}
		wj.remaining--
		wj.finishIfDoneLocked()
	}
}

// caNeeded reports whether the catch-all verdict can still matter: an
// address was accepted, or some address is still undecided.
func (j *job) caNeeded() bool { return j.remaining > 1 || j.nAccepted > 0 }

// finishIfDoneLocked decides the accepted addresses from the catch-all
// verdict and releases Wait.
func (j *job) finishIfDoneLocked() {
	if j.remaining > 0 || j.finished {
		return
	}
	j.finished = true
	out := CatchAll
	if j.ca == caNo {
		out = Deliverable
	}
	for i, ok := range j.accepted {
		if ok && j.results[i].Outcome == Deliverable {
			j.results[i].Outcome = out
		}
	}
	if j.stop != nil {
		j.stop()
	}
	close(j.done)
}

// abortLocked ends the job because its context ended.
func (j *job) abortLocked(err error) {
	j.overErr = err
	j.settleAllLocked(err)
	j.finishIfDoneLocked()
}

// accept handles a 2xx to RCPT.
func (j *job) acceptLocked(it *item, rc reply) {
	if it.idx < 0 {
		j.caVerdictLocked(caYes)
		j.finalLocked(it, Result{})
		return
	}
	j.accepted[it.idx] = true
	j.nAccepted++
	// Before the verdict, or the job could finish without it. A job without
	// a deadline (a list's) queues the probe behind its host's queue: a
	// "user unknown" for another address of the domain, in this call or
	// another, spares it (noCatchAllLocked). With a deadline it goes
	// first, so that the accepted addresses are not left CatchAll ("not
	// ruled out") when time runs out.
	j.queueCatchAllLocked(!j.deadline.IsZero())
	j.finalLocked(it, Result{Outcome: Deliverable, Reply: rc.last, Host: it.tg.host})
}

// queueCatchAllLocked queues the random-address probe, at the front of its
// host's queue or at the back, the first time an address is accepted or
// deferred while the verdict is unknown (a lone address's with it).
//
// One probe per domain is in flight at a time: a job whose domain is being
// probed for another job waits for that verdict (a sub item) instead.
func (j *job) queueCatchAllLocked(front bool) {
	p := j.p
	if j.ca != caUnknown || j.finished || j.dead != nil || j.overErr != nil {
		return
	}
	if v, ok := p.cache.get(j.domain); ok {
		p.st.caCached.Add(1)
		j.ca = caNo
		if v {
			j.ca = caYes
		}
		return
	}
	j.ca = caQueued
	if o := p.caOwner[j.domain]; o != nil && o != j {
		j.caItem = &item{job: j, idx: -1, sub: true, heapIx: -1}
		j.items = append(j.items, j.caItem)
		j.remaining++
		o.caWaiters = append(o.caWaiters, j.caItem)
		return
	}
	j.caItem = &item{job: j, idx: -1, addr: p.randomLocal(j.domain) + "@" + j.domain, heapIx: -1}
	j.items = append(j.items, j.caItem)
	j.remaining++
	p.caOwner[j.domain] = j
	p.route(j.caItem, front)
}

// noCatchAllLocked takes a "user unknown" for one of the job's addresses
// (provesNoCatchAll) as the domain's catch-all verdict: a domain that
// rejects a local part as unknown does not accept every local part. A
// probe still queued, deferred or in flight, the job's own or another
// call's for the domain, is no longer needed; jobs waiting for it get the
// verdict.
func (j *job) noCatchAllLocked() {
	if o := j.p.caOwner[j.domain]; o != nil && o != j {
		o.settleCatchAllLocked()
	}
	j.settleCatchAllLocked()
}

func (j *job) settleCatchAllLocked() {
	switch j.ca {
	case caUnknown:
		j.caVerdictLocked(caNo)
	case caQueued:
		j.caVerdictLocked(caNo)
		if ca := j.caItem; ca != nil && !ca.done {
			j.finalLocked(ca, Result{})
		}
	}
}

func (j *job) caVerdictLocked(v caState) {
	j.ca = v
	switch v {
	case caYes:
		j.p.cache.put(j.domain, true)
		j.p.shareCatchAll(j.domain, true)
	case caNo:
		j.p.cache.put(j.domain, false)
		j.p.shareCatchAll(j.domain, false)
	}
}

// temporaryLocked handles a 4xx: defer the item for GreylistRetry when
// retries remain and the deadline leaves room for the wait plus one more
// session, else give up with Unconfirmed.
func (j *job) temporaryLocked(it *item, r reply, estimate time.Duration) {
	p := j.p
	it.tries++
	it.last = r
	delay := p.cfg.GreylistRetry
	fits := true
	if !j.deadline.IsZero() {
		token := time.Duration(float64(time.Second) / p.cfg.RatePerHost)
		fits = j.p.clk.Until(j.deadline) >= delay+token+estimate
	}
	if it.tries <= p.cfg.MaxGreylistRetries && fits && j.dead == nil && j.overErr == nil {
		p.st.deferred.Add(1)
		p.deferLocked(it, j.p.clk.Now().Add(delay))
		p.holdClaimLocked(it, delay)
		if it.idx >= 0 {
			// Start the random address's greylisting window now too, so
			// that the verdict is ready when the address is retried.
			j.queueCatchAllLocked(true)
		}
		return
	}
	if it.idx < 0 {
		j.caVerdictLocked(caInconclusive)
	}
	j.finalLocked(it, Result{Outcome: Unconfirmed, Reply: r.last, Host: it.tg.host, Greylisted: looksGreylisted(r)})
}

// requeueLocked puts an item back at the front of its job's current host,
// or settles it when the job is over, or when it was in flight on two lost
// sessions.
func (j *job) requeueLocked(it *item, dropped bool, err error) {
	if it.done {
		return
	}
	if dropped {
		it.drops++
	}
	if !j.deadline.IsZero() && !j.p.clk.Now().Before(j.deadline) && j.overErr == nil {
		// Past the deadline: do not wait for the context's watcher.
		j.abortLocked(&budgetError{context.DeadlineExceeded})
	}
	switch {
	case j.overErr != nil:
		j.settleLocked(it, j.overErr)
	case j.dead != nil:
		j.settleLocked(it, j.dead)
	case it.drops >= 2:
		j.settleLocked(it, err)
	default:
		j.p.route(it, true)
	}
}

// silentErr reports whether a host failure means the host never answered:
// a connect that timed out, was refused or reset, or found no route, a
// greeting that never came, a connection closed before the server sent a
// byte (or a penalty remembering one). A host that never sent a byte never
// answered, whoever ended the connection and however. Not silent: a host
// that sent a reply, or that kept refusing after it had answered before
// (ErrHostRefusing), or an address the SSRF guard refused.
func silentErr(err error) bool {
	var he *hostError
	if errors.As(err, &he) && he.reply.code != 0 || errors.Is(err, ErrHostRefusing) || errors.Is(err, ErrNotAllowed) {
		return false
	}
	return errors.Is(err, errNoAnswer) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errConnectTimeout) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// errConnectTimeout marks a connect that timed out.
var errConnectTimeout = errors.New("connect timed out")
