package realmta

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// --- sendmail ----------------------------------------------------------

// Each sendmail host is its own daemon (`sendmail -C <its sendmail.cf>
// -bD`, in the foreground), because sendmail's limits are per instance:
// its sendmail.cf is built with m4 from Debian's sendmail-cf macros (the
// way sendmail's own cf/README says), with sendmail's defaults but for
// what a private, non-delivering instance needs (its own queue, pid file,
// maps and host name; no ident lookups; no load-average limits; queue-only
// delivery; DATA refused by a check_data ruleset) and the anti-harvest
// settings cf/README documents, when the host asks for them:
//
//   - confMAX_RCPTS_PER_MESSAGE (Host.RecipientLimit): past it
//     "452 4.5.3 Too many recipients";
//   - confBAD_RCPT_THROTTLE (Host.BadRcptThrottle): once a transaction has
//     had that many recipients refused, sendmail sleeps a second before
//     each further RCPT reply of the transaction;
//   - FEATURE(`ratecontrol') and FEATURE(`conncontrol') with the access
//     map's ClientRate: and ClientConn: entries (Host.ConnRateLimit per
//     confCONNECTION_RATE_WINDOW_SIZE, Host.ConnRateWindow, and
//     Host.ConnCountLimit at once): past either, the greeting is "421 4.3.2
//     Connection rate limit exceeded." or "421 4.3.2 Too many open
//     connections." and the connection is closed ("terminate").
//
// Mailboxes are a virtusertable (makemap hash): local@domain maps to the
// local user root (which exists, so RCPT is accepted), "@domain" maps to
// "error:5.1.1:550 User unknown" (or to root for a catch-all); the domains
// are class w (use_cw_file). Sender domains are not resolved
// (accept_unresolvable_domains): the world's DNS is not the resolver
// sendmail asks.
//
// sendmail wants a fully qualified name for its machine before it reads
// its configuration (an unqualified one makes it sleep 60 s at start-up),
// so each daemon runs in a UTS namespace of its own whose host name is the
// host's. Its log is its traffic log (-X): every SMTP line in and out,
// prefixed with the pid of the process serving the session (sendmail logs
// nothing else without a syslog daemon).
func (r *Running) startSendmail(i int, h Host) error {
	d := filepath.Join(r.dir, "sendmail", strconv.Itoa(i))
	if err := os.MkdirAll(filepath.Join(d, "queue"), 0o700); err != nil {
		return err
	}
	var cw, vut strings.Builder
	for _, dm := range r.World.Domains {
		if dm.Host != h.Name {
			continue
		}
		fmt.Fprintf(&cw, "%s\n", dm.Name)
		for _, l := range dm.Mailboxes {
			fmt.Fprintf(&vut, "%s@%s\troot\n", l, dm.Name)
		}
		if dm.CatchAll {
			fmt.Fprintf(&vut, "@%s\troot\n", dm.Name)
		} else {
			fmt.Fprintf(&vut, "@%s\terror:5.1.1:550 User unknown\n", dm.Name)
		}
	}
	var access strings.Builder
	if h.ConnRateLimit > 0 {
		fmt.Fprintf(&access, "ClientRate:127\t%d\n", h.ConnRateLimit)
	}
	if h.ConnCountLimit > 0 {
		fmt.Fprintf(&access, "ClientConn:127\t%d\n", h.ConnCountLimit)
	}
	window := r.rateWindow(h)
	if h.ConnRateLimit > 0 && (window < 6*time.Second || window%(6*time.Second) != 0) {
		return fmt.Errorf("realmta: sendmail host %s: connection-rate window %v is not a multiple of 6s (see Host.ConnRateWindow)", h.Name, window)
	}
	var defs strings.Builder
	def := func(k, v string) { fmt.Fprintf(&defs, "define(`%s', `%s')dnl\n", k, v) }
	def("confDOMAIN_NAME", h.Name)
	def("confCF_VERSION", "realmta")
	def("QUEUE_DIR", filepath.Join(d, "queue"))
	def("confPID_FILE", filepath.Join(d, "sendmail.pid"))
	def("STATUS_FILE", filepath.Join(d, "statistics"))
	def("ALIAS_FILE", filepath.Join(d, "aliases"))
	def("HELP_FILE", filepath.Join(d, "helpfile"))
	def("confCW_FILE", filepath.Join(d, "local-host-names"))
	def("confSERVICE_SWITCH_FILE", filepath.Join(d, "service.switch"))
	def("confHOSTS_FILE", filepath.Join(d, "hosts"))
	def("confDONT_PROBE_INTERFACES", "True")
	def("confDELIVERY_MODE", "queueonly")
	def("confTO_IDENT", "0")
	// sendmail closes its listening socket while the load average is
	// past RefuseLA (12 a CPU) and queues rather than delivers past
	// QueueLA: on a test machine that other builds and tests load it
	// stopped listening at start-up ("rejecting connections on daemon
	// MTA: load average: 25"). The world's hosts answer whatever the load.
	def("confREFUSE_LA", "100000")
	def("confQUEUE_LA", "100000")
	// The world's directory is under the sticky, world-writable /tmp.
	def("confDONT_BLAME_SENDMAIL", "TrustStickyBit")
	def("confCONNECTION_RATE_WINDOW_SIZE", secs(window))
	if h.RecipientLimit > 0 {
		def("confMAX_RCPTS_PER_MESSAGE", strconv.Itoa(h.RecipientLimit))
	}
	if h.BadRcptThrottle > 0 {
		def("confBAD_RCPT_THROTTLE", strconv.Itoa(h.BadRcptThrottle))
	}
	mc := fmt.Sprintf("divert(-1)\n# realmta: a private sendmail; defaults kept unless noted.\ndivert(0)dnl\n"+
		"include(`%[1]s/m4/cf.m4')dnl\nVERSIONID(`realmta')dnl\nOSTYPE(`linux')dnl\n%[2]s"+
		"FEATURE(`no_default_msa')dnl\nFEATURE(`accept_unresolvable_domains')dnl\nFEATURE(`use_cw_file')dnl\n"+
		"FEATURE(`access_db', `hash -T<TMPF> %[3]s/access')dnl\n"+
		"FEATURE(`ratecontrol', , `terminate')dnl\nFEATURE(`conncontrol', , `terminate')dnl\n"+
		"FEATURE(`virtusertable', `hash %[3]s/virtusertable')dnl\n"+
		"DAEMON_OPTIONS(`Port=%[4]d, Addr=%[5]s, Name=MTA')dnl\n"+
		"MAILER(`local')dnl\nMAILER(`smtp')dnl\n"+
		"LOCAL_RULESETS\nScheck_data\nR$*\t$#error $@ 5.7.1 $: \"554 this test world accepts no message\"\n",
		r.bins.SendmailCF, defs.String(), d, r.port, r.hostAddr[h.Name])
	files := map[string]string{
		"sendmail.mc": mc, "local-host-names": cw.String(), "virtusertable": vut.String(), "access": access.String(),
		"service.switch": "hosts files\naliases files\n", "hosts": "127.0.0.1 localhost\n", "aliases": "", "helpfile": "",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	cf := filepath.Join(d, "sendmail.cf")
	m4 := exec.Command("m4", filepath.Join(d, "sendmail.mc"))
	out, err := m4.Output()
	if err != nil {
		return fmt.Errorf("realmta: m4 %s: %w", filepath.Join(d, "sendmail.mc"), err)
	}
	if err := os.WriteFile(cf, out, 0o644); err != nil {
		return err
	}
	for _, m := range []string{"virtusertable", "access"} {
		cmd := exec.Command(r.bins.Makemap, "-C", cf, "hash", filepath.Join(d, m))
		in, err := os.Open(filepath.Join(d, m))
		if err != nil {
			return err
		}
		cmd.Stdin = in
		out, err := cmd.CombinedOutput()
		in.Close()
		if err != nil {
			return fmt.Errorf("realmta: makemap %s: %v: %s", m, err, out)
		}
	}
	// A UTS namespace whose host name is the host's (see above); sh sets it
	// and execs sendmail.
	p, err := startProcAttr("sendmail "+h.Name, filepath.Join(r.dir, "log", "sendmail-"+strconv.Itoa(i)+".out"),
		func(a *syscall.SysProcAttr) { a.Cloneflags = syscall.CLONE_NEWUTS },
		"/bin/sh", "-c", `hostname "$1" && shift && exec "$@"`, "sh", h.Name,
		r.bins.Sendmail, "-C", cf, "-bD", "-X", r.sendmailLog(i))
	if err != nil {
		return err
	}
	r.addProc(p)
	a := []netip.Addr{r.hostAddr[h.Name]}
	return r.waitServing(p, a, a, startWait)
}

// sendmailLog is the traffic log of the i-th host (a sendmail host).
func (r *Running) sendmailLog(i int) string {
	return filepath.Join(r.dir, "log", "sendmail-"+strconv.Itoa(i)+".traffic")
}
