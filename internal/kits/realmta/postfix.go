package realmta

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Postfix: one instance (its own config directory, queue_directory and
// data_directory under the world's directory, started with
// `postfix -c DIR start-fg`), one master.cf listener per host. Its log goes
// to maillog_file through postlogd (Postfix >= 3.4), so no syslog daemon is
// needed; each listener logs under syslog_name "realmta/<host>".
//
// Nothing is ever delivered or relayed: DATA is rejected
// (smtpd_data_restrictions = reject), the virtual transport is listed in
// defer_transports, every other transport is the error transport, relaying
// is refused (smtpd_relay_restrictions = reject_unauth_destination), and
// mydestination and mynetworks are empty (so that anvil's limits apply to
// loopback clients too: by default mynetworks is exempt).

const postfixSyslog = "realmta"

// postfixDefaults are the main.cf lines of every world; Options.PostfixMain
// may override them.
func (r *Running) postfixMain(dir string) map[string]string {
	d := filepath.Join(r.dir, "postfix")
	m := map[string]string{
		"compatibility_level":                 "3.6",
		"queue_directory":                     filepath.Join(d, "queue"),
		"data_directory":                      filepath.Join(d, "data"),
		"myhostname":                          "postfix." + r.opt.Zone,
		"mydomain":                            r.opt.Zone,
		"myorigin":                            "$myhostname",
		"mydestination":                       "",
		"mynetworks":                          "",
		"relayhost":                           "",
		"relay_domains":                       "",
		"inet_interfaces":                     "127.0.0.1", // master.cf names each listener's address
		"inet_protocols":                      "ipv4",
		"maillog_file":                        filepath.Join(r.dir, "log", "postfix.log"),
		"maillog_file_prefixes":               r.dir,
		"syslog_name":                         postfixSyslog,
		"virtual_mailbox_domains":             "texthash:" + filepath.Join(dir, "virtual_domains"),
		"virtual_mailbox_maps":                "texthash:" + filepath.Join(dir, "virtual_mailboxes"),
		"virtual_mailbox_base":                filepath.Join(d, "vmail"),
		"virtual_transport":                   "virtual",
		"defer_transports":                    "virtual",
		"default_transport":                   "error:5.3.0 this test world delivers nothing",
		"local_transport":                     "error:5.3.0 this test world delivers nothing",
		"relay_transport":                     "error:5.3.0 this test world delivers nothing",
		"smtpd_relay_restrictions":            "reject_unauth_destination",
		"smtpd_data_restrictions":             "reject",
		"smtpd_client_event_limit_exceptions": "",
		"smtpd_peername_lookup":               "no", // no resolver outside the world
		"smtpd_tls_security_level":            "none",
		"smtp_tls_security_level":             "none",
		"notify_classes":                      "",
		"alias_maps":                          "",
		"alias_database":                      "",
		"biff":                                "no",
		"append_dot_mydomain":                 "no",
		// Recipient checks: full mailboxes and policy domains first, then
		// (implicitly, smtpd_reject_unlisted_recipient) the mailbox lookup;
		// greylisting listeners check the mailbox explicitly, then ask
		// postgrey, so unknown users get 550 at once.
		"realmta_recipient_access":     "check_recipient_access texthash:" + filepath.Join(dir, "recipient_access"),
		"realmta_greylist":             "$realmta_recipient_access, reject_unlisted_recipient, check_policy_service inet:" + r.greyAddr.String(),
		"smtpd_recipient_restrictions": "$realmta_recipient_access",
	}
	if r.opt.AnvilRateTimeUnit > 0 {
		m["anvil_rate_time_unit"] = secs(r.opt.AnvilRateTimeUnit)
	}
	if r.opt.PostscreenGreetWait > 0 {
		m["postscreen_greet_wait"] = secs(r.opt.PostscreenGreetWait)
	}
	// Tarpits: a "sleep N" restriction list per silence (restriction
	// lists with white space cannot be given with master.cf's -o).
	for _, h := range r.World.Hosts {
		if h.Tarpit > 0 {
			m[tarpitParam(h.Tarpit)] = "sleep " + strconv.Itoa(int(h.Tarpit/time.Second))
		}
	}
	if r.silent != nil {
		m["realmta_hangup"] = "check_policy_service inet:" + r.silent.addr()
	}
	for k, v := range r.opt.PostfixMain {
		m[k] = v
	}
	return m
}

func tarpitParam(d time.Duration) string {
	return "realmta_tarpit_" + strconv.Itoa(int(d/time.Second))
}

func secs(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"
}

// postfix services every master.cf needs (no pickup: nothing is posted
// locally; no smtp client: nothing leaves).
const postfixServices = `cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
proxymap  unix  -       -       n       -       -       proxymap
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`

func (r *Running) writePostfix() (string, error) {
	conf := filepath.Join(r.dir, "postfix", "conf")
	for _, d := range []string{conf, "queue", "data", "vmail"} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(r.dir, "postfix", d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	pf, err := user.Lookup("postfix")
	if err != nil {
		return "", fmt.Errorf("realmta: %w (is postfix installed?)", err)
	}
	uid, _ := strconv.Atoi(pf.Uid)
	if err := os.Chown(filepath.Join(r.dir, "postfix", "data"), uid, -1); err != nil {
		return "", err
	}

	var domains, boxes, access strings.Builder
	for _, d := range r.World.Domains {
		h, ok := r.host(d.Host)
		if !ok || h.Software != Postfix {
			continue
		}
		fmt.Fprintf(&domains, "%s x\n", d.Name)
		if d.CatchAll {
			fmt.Fprintf(&boxes, "@%s x\n", d.Name)
		}
		for _, l := range append(append([]string{}, d.Mailboxes...), d.Full...) {
			fmt.Fprintf(&boxes, "%s@%s x\n", l, d.Name)
		}
		for _, l := range d.Full {
			fmt.Fprintf(&access, "%s@%s 552 5.2.2 Mailbox full\n", l, d.Name)
		}
		if d.Policy {
			fmt.Fprintf(&access, "%s 550 5.7.1 Recipient rejected by local policy\n", d.Name)
		}
	}
	files := map[string]string{
		"virtual_domains":   domains.String(),
		"virtual_mailboxes": boxes.String(),
		"recipient_access":  access.String(),
	}
	var main strings.Builder
	m := r.postfixMain(conf)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&main, "%s = %s\n", k, m[k])
	}
	files["main.cf"] = main.String()
	files["master.cf"] = r.postfixMaster()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return conf, nil
}

// postfixMaster writes one listener per Postfix host (two lines with
// postscreen: postscreen on the address, and a pass service smtpd-N that
// it hands clients to).
func (r *Running) postfixMaster() string {
	var b strings.Builder
	for i, h := range r.World.Hosts {
		if h.Software != Postfix {
			continue
		}
		o := map[string]string{
			"myhostname":  h.Name,
			"syslog_name": postfixSyslog + "/" + h.Name,
		}
		if h.Greylist {
			o["smtpd_recipient_restrictions"] = "$realmta_greylist"
		}
		if h.ConnRateLimit > 0 {
			o["smtpd_client_connection_rate_limit"] = strconv.Itoa(h.ConnRateLimit)
		}
		if h.ConnCountLimit > 0 {
			o["smtpd_client_connection_count_limit"] = strconv.Itoa(h.ConnCountLimit)
		}
		if h.RecipientLimit > 0 {
			o["smtpd_recipient_limit"] = strconv.Itoa(h.RecipientLimit)
		}
		// The client restrictions run before the greeting (Postfix
		// documents "sleep" with smtpd_delay_reject = no for exactly
		// this). HangUp: the policy server never answers, and smtpd's
		// watchdog (daemon_timeout, in three steps) kills the process
		// first; msg_fatal sleeps a second before the exit closes the
		// connection.
		switch {
		case h.Tarpit > 0:
			o["smtpd_delay_reject"] = "no"
			o["smtpd_client_restrictions"] = "$" + tarpitParam(h.Tarpit)
		case h.HangUp > 0:
			o["smtpd_delay_reject"] = "no"
			o["smtpd_client_restrictions"] = "$realmta_hangup"
			o["daemon_timeout"] = secs(h.HangUp - time.Second)
		}
		for k, v := range h.Postfix {
			o[k] = v
		}
		listen := fmt.Sprintf("%s:%d", r.hostAddr[h.Name], r.port)
		if !h.Postscreen {
			fmt.Fprintf(&b, "%s inet n - n - - smtpd%s\n", listen, opts(o))
			continue
		}
		pass := fmt.Sprintf("smtpd-%d", i)
		ps := map[string]string{"postscreen_greet_action": "enforce", "smtpd_service_name": pass}
		for k, v := range o {
			ps[k] = v
		}
		fmt.Fprintf(&b, "%s inet n - n - 1 postscreen%s\n", listen, opts(ps))
		fmt.Fprintf(&b, "%s pass - - n - - smtpd%s\n", pass, opts(o))
	}
	b.WriteString(postfixServices)
	return b.String()
}

func opts(o map[string]string) string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  -o %s=%s", k, o[k])
	}
	return b.String()
}

// startPostfix runs `postfix -c conf start-fg`: postfix-script stays our
// child and waits for master (which makes its own session).
//
// Postfix waits (300 ms at a time) until a table or main.cf it loads is
// more than a second old, lest it read one being written: the world's
// files are dated a few seconds back first, which saved 2 s a start.
func (r *Running) startPostfix(conf string) error {
	if err := backdate(conf, 5*time.Second); err != nil {
		return err
	}
	if err := r.makePostfixQueue(); err != nil {
		return err
	}
	p, err := startProc("postfix", filepath.Join(r.dir, "log", "postfix.out"), r.bins.Postfix, "-c", conf, "start-fg")
	if err != nil {
		return err
	}
	r.postfix = p
	r.postfixConf = conf
	return r.waitServing(p, r.addrsOf(Postfix), r.greetingAddrs(Postfix), startWait)
}

// stopPostfix asks master to stop (it stops its children), then makes
// sure: master's pid from its pid file, and postfix-script's group.
func (r *Running) stopPostfix() {
	p := r.postfix
	if p == nil {
		return
	}
	if !p.exited() {
		cmd := exec.Command(r.bins.Postfix, "-c", r.postfixConf, "stop")
		_ = cmd.Run()
	}
	if !p.wait(15 * time.Second) {
		pidFile := filepath.Join(r.dir, "postfix", "queue", "pid", "master.pid")
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				killPid(pid)
			}
		}
		p.terminate(2 * time.Second)
	}
}

// backdate sets the modification time of every file below dir to d ago.
func backdate(dir string, d time.Duration) error {
	old := time.Now().Add(-d)
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
}

// makePostfixQueue creates the queue directories as Postfix's installer
// would (`post-install create-missing`: each $queue_directory line of
// Postfix's own postfix-files manifest, with its owner, group and mode)
// and leaves the quick-start mark postfix-script honours: `postfix start`
// then skips its installation checks (check-fatal, which runs
// create-missing, and check-warn: some 60 processes, 23 of them postconf,
// 1.3 s of CPU; 4 to 15 s of a loaded 2-core machine) on a queue that was
// made a moment ago and holds nothing.
func (r *Running) makePostfixQueue() error {
	meta, err := exec.Command(r.bins.Postconf, "-d", "-h", "meta_directory").Output()
	if err != nil {
		return fmt.Errorf("realmta: postconf meta_directory: %w", err)
	}
	manifest, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(meta)), "postfix-files"))
	if err != nil {
		return err
	}
	// postfix-files names mail_owner and setgid_group, Debian's postfix
	// and postdrop.
	owner, err := user.Lookup("postfix")
	if err != nil {
		return err
	}
	group, err := user.LookupGroup("postdrop")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(group.Gid)
	ids := map[string]int{"-": -1, "root": 0, "$mail_owner": uid, "$setgid_group": gid}
	queue := filepath.Join(r.dir, "postfix", "queue")
	n := 0
	for _, line := range strings.Split(string(manifest), "\n") {
		// $queue_directory/active:d:$mail_owner:-:700:ucr
		f := strings.Split(line, ":")
		if len(f) < 5 || f[1] != "d" || !strings.HasPrefix(f[0], "$queue_directory/") {
			continue
		}
		uid, okU := ids[f[2]]
		gid, okG := ids[f[3]]
		mode, err := strconv.ParseUint(f[4], 8, 32)
		if !okU || !okG || err != nil {
			return fmt.Errorf("realmta: postfix-files: cannot read %q", line)
		}
		d := filepath.Join(queue, strings.TrimPrefix(f[0], "$queue_directory/"))
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(d, os.FileMode(mode)); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("realmta: postfix-files lists no queue directory")
	}
	return os.WriteFile(filepath.Join(queue, "quick-start"), nil, 0o644)
}
