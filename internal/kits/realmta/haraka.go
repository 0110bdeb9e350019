package realmta

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// --- Haraka ------------------------------------------------------------

// Each Haraka host is its own Haraka (`node bin/haraka -c <its dir>`, one
// process, nodes=0), because its plugins' limits are per instance, on the
// machine's Node.js, with one redis-server of the world (at 127.B.0.63)
// keeping the karma and limit plugins' counters (each host its own redis
// database). Its configuration is Haraka's defaults (connection.ini copied
// from the package) plus, in config/plugins order:
//
//   - realmta_local: the world's clients (127.0.0.0/8) stand for clients on
//     the internet, so karma, which exempts private addresses, scores them;
//   - redis, then karma (Host.Karma) with its tarpit: karma's scoring as
//     shipped, plus the award karma.ini gives the recipient plugins'
//     refusals (rcpt_to.in_host_list, qmail_deliverable: -1, "Invalid
//     envelope recipient", once a connection) for the mailbox plugin's
//     (which adds it to karma's score itself: a result_awards line for it
//     did not reach karma through its results channel here, not yet
//     understood), [tarpit] max Host.KarmaTarpitMax: once
//     a connection's score is negative every reply waits -score seconds
//     (at most max); karma's IP history (redis) carries a poor reputation
//     into the client's next connections;
//   - limit (any of Host.ConnCountLimit, ConnRateLimit per
//     Host.ConnRateWindow, RecipientLimit, ErrorLimit), whose refusals
//     are temporary ("Too many concurrent connections", "connection rate
//     limit exceeded" with a disconnect; "Too many recipient attempts"),
//     each after the shipped tarpit_delay (3s); with Karma, the shipped
//     [concurrency_history] and [recipients_history] apply first: a client
//     karma knows as bad gets 1 connection at once and 1 recipient a
//     connection, one it does not know 2 and 5, a good one 10 and 50
//     (Host.ConnCountLimit and RecipientLimit are then the limits of a
//     client whose history karma cannot tell);
//   - realmta_rcpt: the world's mailboxes (config/realmta_mailboxes,
//     "local@domain" or "@domain" for a catch-all): a known one is
//     accepted, an unknown one refused "550 5.1.1 <addr>: no such user",
//     another domain "550 relay not permitted"; DATA is refused.
//
// Its log (level protocol, timestamped) shows every command and reply.
func (r *Running) startHaraka(i int, h Host) error {
	d := filepath.Join(r.dir, "haraka", strconv.Itoa(i))
	for _, sub := range []string{"config", "plugins"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	var boxes, domains strings.Builder
	for _, dm := range r.World.Domains {
		if dm.Host != h.Name {
			continue
		}
		fmt.Fprintf(&domains, "%s\n", dm.Name)
		if dm.CatchAll {
			fmt.Fprintf(&boxes, "@%s\n", dm.Name)
		}
		for _, l := range dm.Mailboxes {
			fmt.Fprintf(&boxes, "%s@%s\n", l, dm.Name)
		}
	}
	redis := fmt.Sprintf("[redis]\nhost=%s\nport=%d\ndb=%d\n", r.redisAddr.Addr(), r.redisAddr.Port(), 1+i%15)
	plugins := []string{"realmta_local", "redis"}
	files := map[string]string{
		"config/smtp.ini":          fmt.Sprintf("[main]\nlisten=%s:%d\nnodes=0\n", r.hostAddr[h.Name], r.port),
		"config/log.ini":           "[main]\nlevel=protocol\ntimestamps=true\n",
		"config/me":                h.Name + "\n",
		"config/redis.ini":         redis + "[server]\nhost=" + r.redisAddr.Addr().String() + "\nport=" + strconv.Itoa(int(r.redisAddr.Port())) + "\n",
		"config/realmta_mailboxes": boxes.String(),
		"config/realmta_domains":   domains.String(),
		"plugins/realmta_local.js": harakaLocalPlugin,
		"plugins/realmta_rcpt.js":  harakaRcptPlugin,
		"config/internalcmd_key":   "realmta\n",
	}
	if h.Karma {
		plugins = append(plugins, "karma")
		tmax := h.KarmaTarpitMax
		if tmax <= 0 {
			tmax = time.Second
		}
		files["config/karma.ini"] = fmt.Sprintf("%s[tarpit]\ndelay=0\nmax=%s\n[asn]\nenable=false\n", redis,
			strconv.FormatFloat(tmax.Seconds(), 'f', -1, 64))
	}
	if h.ConnCountLimit > 0 || h.ConnRateLimit > 0 || h.RecipientLimit > 0 || h.ErrorLimit > 0 {
		plugins = append(plugins, "limit")
		var b strings.Builder
		b.WriteString("[main]\n" + redis)
		if h.ConnCountLimit > 0 {
			fmt.Fprintf(&b, "[concurrency]\nenabled=true\nmax=%d\n", h.ConnCountLimit)
		}
		if h.RecipientLimit > 0 {
			fmt.Fprintf(&b, "[recipients]\nenabled=true\nmax=%d\n", h.RecipientLimit)
		}
		if h.ErrorLimit > 0 {
			fmt.Fprintf(&b, "[errors]\nenabled=true\nmax=%d\n", h.ErrorLimit)
		}
		if h.ConnRateLimit > 0 {
			window := r.rateWindow(h)
			// The shipped limit.ini exempts 127 (127=0): the world's
			// clients are all there.
			fmt.Fprintf(&b, "[rate_conn]\nenabled=true\n127=%[1]d/%[2]ds\ndefault=%[1]d/%[2]ds\n", h.ConnRateLimit, int(window/time.Second))
		}
		files["config/limit.ini"] = b.String()
	}
	plugins = append(plugins, "realmta_rcpt")
	files["config/plugins"] = strings.Join(plugins, "\n") + "\n"
	conn, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(r.bins.Haraka)), "config", "connection.ini"))
	if err != nil {
		return fmt.Errorf("realmta: Haraka's connection.ini: %w", err)
	}
	files["config/connection.ini"] = string(conn)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	p, err := startProc("haraka "+h.Name, r.harakaLog(i), "/usr/bin/env", "node", r.bins.Haraka, "-c", d)
	if err != nil {
		return err
	}
	r.addProc(p)
	started := time.Now()
	if err := waitListening(p, []netip.Addr{r.hostAddr[h.Name]}, r.port, startWait); err != nil {
		return err
	}
	// Haraka listens before its plugins' init_master hooks have connected
	// to redis; until then karma and limit let everything through.
	want := []string{"[redis] connected to redis"}
	for _, pl := range plugins {
		if pl == "karma" || pl == "limit" {
			want = append(want, "["+pl+"] connected to redis")
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		log, _ := os.ReadFile(r.harakaLog(i))
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(log), w) {
				missing = w
			}
		}
		if missing == "" {
			// And it serves: it answers a connection with its greeting.
			return r.waitGreeting(p, []netip.Addr{r.hostAddr[h.Name]}, started.Add(startWait))
		}
		if p.exited() || time.Now().After(deadline) {
			return fmt.Errorf("realmta: Haraka %s: no %q in its log: %s", h.Name, missing, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rateWindow is the window of h's ConnRateLimit at sendmail and Haraka:
// Host.ConnRateWindow, else Options.AnvilRateTimeUnit, else 60s.
func (r *Running) rateWindow(h Host) time.Duration {
	switch {
	case h.ConnRateWindow > 0:
		return h.ConnRateWindow
	case r.opt.AnvilRateTimeUnit > 0:
		return r.opt.AnvilRateTimeUnit
	}
	return 60 * time.Second
}

// harakaLog is the log (stdout) of the i-th host (a Haraka host).
func (r *Running) harakaLog(i int) string {
	return filepath.Join(r.dir, "log", "haraka-"+strconv.Itoa(i)+".log")
}

// startRedis runs the world's redis-server (no persistence) for the
// Haraka hosts' plugins.
func (r *Running) startRedis() error {
	d := filepath.Join(r.dir, "redis")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	p, err := startProc("redis", filepath.Join(r.dir, "log", "redis.log"), r.bins.Redis,
		"--bind", r.redisAddr.Addr().String(), "--port", strconv.Itoa(int(r.redisAddr.Port())),
		"--save", "", "--appendonly", "no", "--dir", d, "--pidfile", filepath.Join(d, "redis.pid"), "--protected-mode", "no")
	if err != nil {
		return err
	}
	r.addProc(p)
	return waitListening(p, []netip.Addr{r.redisAddr.Addr()}, int(r.redisAddr.Port()), startWait)
}

const harakaLocalPlugin = `// realmta: the test world's clients (127.0.0.0/8) stand for clients on
// the internet: plugins that exempt private addresses (karma) see them as
// public.
exports.hook_connect_init = function (next, connection) {
  connection.remote.is_private = false
  connection.remote.is_local = false
  next()
}
`

const harakaRcptPlugin = `// realmta: the test world's mailboxes (config/realmta_mailboxes:
// local@domain, or @domain for a catch-all) and domains
// (config/realmta_domains).
exports.register = function () {
  this.load()
}
exports.load = function () {
  const list = (f) => new Set(this.config.get(f, 'list', () => this.load()).map((s) => s.toLowerCase()))
  this.boxes = list('realmta_mailboxes')
  this.domains = list('realmta_domains')
  this.karma = this.config.get('plugins', 'list').includes('karma')
}
exports.hook_rcpt = function (next, connection, params) {
  const rcpt = params[0]
  const host = (rcpt.host || '').toLowerCase()
  const user = (rcpt.user || '').toLowerCase()
  const txn = connection.transaction
  if (!this.domains.has(host)) {
    txn.results.add(this, { fail: 'relay' })
    return next(DENY, 'relay not permitted')
  }
  if (this.boxes.has(user + '@' + host) || this.boxes.has('@' + host)) {
    txn.results.add(this, { pass: 'mailbox' })
    return next(OK)
  }
  txn.results.add(this, { fail: 'mailbox' })
  connection.results.add(this, { fail: 'mailbox' })
  if (this.karma && !connection.notes.realmta_awarded) {
    // karma's award for an invalid envelope recipient (see haraka.go).
    connection.notes.realmta_awarded = true
    connection.results.incr({ name: 'karma' }, { score: -1 })
    connection.results.push({ name: 'karma' }, { awards: '900' })
  }
  next(DENY, '5.1.1 <' + user + '@' + host + '>: no such user')
}
exports.hook_data = function (next) {
  next(DENY, 'this test world accepts no message')
}
`

// harakaCounts reads one Haraka host's log: "<time> [LEVEL] [uuid(.txn)]
// [plugin] message" lines; "[core] connect ip=" and "[core] disconnect
// ip=" bound a session, "[core] C: ..." and "[core] S: ..." are its
// commands and replies (Haraka answers a command before it reads the
// next), "[karma] tarpitting" a delayed reply. The timestamps give the
// most sessions at once and the most connections in a window.
func (r *Running) harakaCounts(i int, hc *HostCounts) error {
	ss := map[string]*smtpTally{}
	probe := "connect ip=" + r.probeAddr().String() + " "
	probes := map[string]bool{} // the kit's readiness probe's session (waitGreeting)
	var opens, closes []time.Time
	err := eachLine(r.harakaLog(i), func(line string) {
		f := strings.SplitN(line, " ", 5)
		if len(f) < 5 || !strings.HasPrefix(f[2], "[") {
			return
		}
		uuid := strings.Trim(f[2], "[]")
		uuid, _, _ = strings.Cut(uuid, ".")
		plugin, msg := f[3], f[4]
		ts, _ := time.Parse(time.RFC3339Nano, f[0])
		if plugin == "[core]" && strings.HasPrefix(msg, probe) {
			probes[uuid] = true
		}
		if probes[uuid] {
			return
		}
		switch {
		case plugin == "[karma]" && strings.HasPrefix(msg, "tarpitting "):
			hc.Throttled++
			return
		case plugin != "[core]":
			return
		case strings.HasPrefix(msg, "connect ip="):
			ss[uuid] = &smtpTally{}
			hc.Sessions++
			opens = append(opens, ts)
			return
		case strings.HasPrefix(msg, "disconnect ip="):
			hc.Disconnects++
			closes = append(closes, ts)
			return
		}
		s := ss[uuid]
		if s == nil {
			return
		}
		if cmd, ok := strings.CutPrefix(msg, "C: "); ok {
			s.command(hc, cmd)
			return
		}
		text, ok := strings.CutPrefix(msg, "S: ")
		if !ok || len(text) < 4 || text[3] == '-' {
			return
		}
		code := text[:3]
		switch {
		case strings.Contains(text, "Too many concurrent connections"):
			hc.AnvilRefused++
			hc.AnvilCount++
		case strings.Contains(text, "connection rate limit exceeded"):
			hc.AnvilRefused++
			hc.AnvilRate++
		}
		if code == "421" {
			hc.Disconnected++
		}
		s.reply(hc, code)
	})
	hc.MaxConcurrent = maxOverlap(opens, closes)
	window := r.rateWindow(r.World.Hosts[i])
	hc.MaxConnsPerWindow = maxInWindow(opens, window)
	return err
}

// maxOverlap is the most intervals open at once, given their starts and
// ends (each sorted: logs are in time order).
func maxOverlap(opens, closes []time.Time) int {
	n, best, j := 0, 0, 0
	for _, o := range opens {
		for j < len(closes) && !closes[j].After(o) {
			j++
			n--
		}
		n++
		best = max(best, n)
	}
	return best
}

// maxInWindow is the most times within any span of w (times sorted).
func maxInWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
