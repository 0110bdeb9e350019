package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	emailverifier "github.com/AfterShip/email-verifier"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
)

// Predicted categories besides the mail world's Truth* names.
const (
	predNoMail = "nomail" // AfterShip: the domain has no usable MX (it cannot tell NXDOMAIN, no address and null MX apart)
	predOther  = "other"
)

// settings shared by the runs.
type settings struct {
	concurrency   int
	port          int
	greylistRetry time.Duration
	singleTimeout time.Duration
	worker        string   // worker binary ("": build it)
	workerArgs    []string // more flags for worker run
	procs         int      // ours-list: worker run processes sharing the list
	fleetURL      string   // ours-list: their --fleet-url ("": none)
	split         string   // ours-list with procs: "rows" (contiguous parts) or "domain"
	noHistory     bool     // ours-list: no verification history even with a fleet
	// conf is -config's file with -set's keys: engine settings written
	// over the tool's in every Configuration of ours (engineConfig).
	conf map[string]any
}

// runAfterShip verifies every address with AfterShip's Verify, from a
// worker pool of s.concurrency goroutines, and returns the predicted
// category per address plus a short note of the raw answer.
func runAfterShip(addrs []string, s settings) (pred, raw []string) {
	v := emailverifier.NewVerifier().
		EnableSMTPCheck().             // off by default
		DisableAutoUpdateDisposable(). // never enabled here: no download of the disposable list
		DisableGravatarCheck().        // default; would call gravatar.com
		DisableDomainSuggest().        // default
		HelloName("verify.test").
		FromEmail("probe@verify.test")
	// Catch-all detection is on by default; connect and operation timeouts
	// keep their defaults (10 s each). No API verifier (Yahoo) is enabled.
	pred = make([]string, len(addrs))
	raw = make([]string, len(addrs))
	pool(len(addrs), s.concurrency, func(i int) {
		res, err := v.Verify(addrs[i])
		pred[i], raw[i] = classifyAfterShip(res, err)
	})
	return pred, raw
}

// classifyAfterShip maps one AfterShip answer to a category (see the
// mapping table in docs/benchmarks.md).
func classifyAfterShip(res *emailverifier.Result, err error) (string, string) {
	if res == nil {
		return predOther, "nil result"
	}
	if !res.Syntax.Valid {
		return mailworldInvalid, "syntax invalid"
	}
	if res.Disposable {
		return truthDisposable, "disposable"
	}
	if err != nil {
		var le *emailverifier.LookupError
		if errors.As(err, &le) && le != nil {
			switch le.Message {
			case emailverifier.ErrTimeout:
				return truthTimeout, "smtp error: timeout"
			case emailverifier.ErrNoSuchHost:
				return predNoMail, "smtp error: no such host (mx=" + strconv.FormatBool(res.HasMxRecords) + ")"
			}
			return truthUnconfirmed, "smtp error: " + le.Message
		}
		if !res.HasMxRecords {
			// net.LookupMX failed: NXDOMAIN and "no MX record" look alike.
			return predNoMail, "mx lookup error"
		}
		return truthUnconfirmed, "error: " + err.Error()
	}
	if !res.HasMxRecords {
		return predNoMail, "no mx"
	}
	sm := res.SMTP
	if sm == nil {
		return predOther, "no smtp result"
	}
	switch {
	case res.Reachable == "yes":
		return truthDeliverable, "reachable=yes"
	case sm.CatchAll:
		return truthCatchAll, "reachable=" + res.Reachable + " catch_all"
	case sm.FullInbox:
		return truthFull, "reachable=" + res.Reachable + " full_inbox"
	case res.Reachable == "no":
		return truthMissing, "reachable=no"
	}
	return truthUnconfirmed, "reachable=" + res.Reachable
}

// newEngine builds our engine for the single-address path the way
// internal/wiring.NewEngine does for the API (lists, typos, mxdns,
// smtpprobe with the API's timeouts and the production per-host limits),
// pointed at the world's DNS server and SMTP port; with f, the per-host
// limits and learnt state are the fleet's, as wiring gives them with
// --fleet-url, and the API's host penalty TTL (5 min) applies.
func newEngine(dnsAddr string, s settings, f *fleet.Fleet) (*verify.Engine, *smtpprobe.Prober) {
	// The per-host limits are smtpprobe's defaults, as the binaries' are;
	// the timeouts are wiring.DefaultAPIVerifyConfig's (wiring is not
	// imported: it would pull the blob store clients into this module).
	cfg := smtpprobe.Config{
		Port: s.port, HELOName: "verify.test", MailFrom: "probe@verify.test",
		MaxSessions:    s.concurrency,
		ConnectTimeout: 5 * time.Second, GreetingTimeout: 10 * time.Second, CommandTimeout: 10 * time.Second,
		GreylistRetry: s.greylistRetry,
	}
	if f != nil {
		cfg.Limiter, cfg.Learnt, cfg.HostPenaltyTTL = f, f, 5*time.Minute
	}
	p := smtpprobe.New(cfg)
	e := &verify.Engine{
		Lists:         emaillists.Default,
		Typos:         typo.Default(),
		DNS:           mxdns.New(mxdns.Config{Server: dnsAddr, Timeout: 2 * time.Second}),
		SMTP:          p,
		DomainWorkers: s.concurrency,
		ExtraTLDs:     map[string]bool{"test": true},
	}
	return e, p
}

// runOursList is the list path as a user runs it: the worker binary's
// `run` command over the list as a CSV file, with production defaults but
// for the world's DNS server and port, the loopback range opened to SMTP,
// and the concurrency setting as the session cap. It returns the worker's
// CPU time and its --stats report.
func runOursList(dnsAddr string, rows []string, s settings) (pred, raw []string, cpu float64, stats string, err error) {
	dir, err := os.MkdirTemp("", "compare-")
	if err != nil {
		return nil, nil, 0, "", err
	}
	defer os.RemoveAll(dir)
	bin, err := workerBinary(dir, s)
	if err != nil {
		return nil, nil, 0, "", err
	}
	procs := max(1, s.procs)
	type proc struct {
		cmd    *exec.Cmd
		out    string
		rows   int
		stderr strings.Builder
	}
	ps := make([]*proc, 0, procs)
	parts := splitRows(rows, procs, s.split, mxKeys(s.split, dnsAddr, rows))
	for i, part := range parts {
		in := filepath.Join(dir, fmt.Sprintf("list%d.csv", i))
		sub := make([]string, len(part))
		for k, ix := range part {
			sub[k] = rows[ix]
		}
		if err := writeList(in, sub); err != nil {
			return nil, nil, 0, "", err
		}
		pr := &proc{out: filepath.Join(dir, fmt.Sprintf("result%d.csv", i)), rows: len(part)}
		cmd, err := workerCmd(bin, in, pr.out, dnsAddr, s, i, procs)
		if err != nil {
			return nil, nil, 0, "", err
		}
		pr.cmd = cmd
		pr.cmd.Stderr = &pr.stderr
		if procs == 1 {
			pr.cmd.Stderr = io.MultiWriter(&pr.stderr, os.Stderr)
		}
		ps = append(ps, pr)
	}
	for _, pr := range ps {
		if err := pr.cmd.Start(); err != nil {
			return nil, nil, 0, "", fmt.Errorf("worker run: %w", err)
		}
	}
	var errs []error
	for i, pr := range ps {
		if err := pr.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker run %d: %w: %s", i, err, pr.stderr.String()))
		}
		if ru, ok := pr.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, 0, "", err
	}
	var notes []string
	pred, raw = make([]string, len(rows)), make([]string, len(rows))
	for i, pr := range ps {
		p, r, err := readResult(pr.out, pr.rows)
		if err != nil {
			return nil, nil, 0, "", fmt.Errorf("result %d: %w", i, err)
		}
		for k, ix := range parts[i] {
			pred[ix], raw[ix] = p[k], r[k]
		}
		if procs == 1 {
			notes = append(notes, pr.stderr.String())
		} else {
			notes = append(notes, fmt.Sprintf("process %d:\n%s", i, lastLines(pr.stderr.String(), 12)))
		}
	}
	return pred, raw, cpu, strings.Join(notes, ""), nil
}

// workerBinary is s.worker, or the worker built into dir.
func workerBinary(dir string, s settings) (string, error) {
	if s.worker != "" {
		return s.worker, nil
	}
	bin := filepath.Join(dir, "worker")
	build := exec.Command("go", "build", "-o", bin, "github.com/emaildata/emaildata/cmd/worker")
	build.Dir, build.Stderr = "../..", os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build worker: %w", err)
	}
	return bin, nil
}

// workerCmd is `worker run` over the list in, its result to out, as seat
// of seats processes sharing s.fleetURL. Its settings are engineConfig's,
// in a configuration file beside in (worker run takes no engine flags);
// the seat and seats are the environment's, as a Job pod's are.
func workerCmd(bin, in, out, dnsAddr string, s settings, seat, seats int) (*exec.Cmd, error) {
	conf := strings.TrimSuffix(in, filepath.Ext(in)) + ".config.yaml"
	data, err := engineConfig(dnsAddr, s, nil)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, data, 0o600); err != nil {
		return nil, err
	}
	args := []string{"run", "--config", conf, "--in", in, "--out", out, "--delimiter", "comma", "--header", "--email-column", "1",
		"--stats", "--progress", "30s"}
	cmd := exec.Command(bin, append(args, s.workerArgs...)...)
	cmd.Env = append(childEnv(), "JOB_COMPLETION_INDEX="+strconv.Itoa(seat), "EMAILDATA_FLEET_SEATS="+strconv.Itoa(seats))
	return cmd, nil
}

// benchHistoryKey keys the verification history of the runs that have one
// (-fleet-url) when $HISTORY_KEY is not set: a history needs a key, and
// runs meant to reuse a prefix's history need the same one.
const benchHistoryKey = "hack-compare-history-key-0001"

// childEnv is the environment of the processes a run starts: this one's,
// without the fleet and history URLs (their configuration says them),
// with a key.
func childEnv() []string {
	return append(os.Environ(), "FLEET_URL=", "HISTORY_URL=", "HISTORY_KEY="+cmp.Or(os.Getenv("HISTORY_KEY"), benchHistoryKey))
}

// splitRows gives each of n processes its rows (indices into rows):
// contiguous parts ("rows", as a list's shards are), or by a hash of the
// row's domain ("domain": every row of a domain, so of its mail hosts
// mostly, in one process), or of its domain's primary MX host ("mx", as
// the manager's --shard-by mx: hostOf from mxKeys; a domain missing from
// it goes by its own name).
func splitRows(rows []string, n int, by string, hostOf map[string]string) [][]int {
	parts := make([][]int, n)
	for i, r := range rows {
		p := i * n / len(rows)
		if by == "domain" || by == "mx" {
			d := rowDomain(r)
			if h, ok := hostOf[d]; ok {
				d = "mx:" + h
			}
			h := fnv.New32a()
			h.Write([]byte(d))
			p = int(h.Sum32() % uint32(n))
		}
		parts[p] = append(parts[p], i)
	}
	return parts
}

func rowDomain(r string) string {
	d := strings.ToLower(strings.TrimSpace(r))
	if at := strings.LastIndexByte(d, '@'); at >= 0 {
		d = d[at+1:]
	}
	return d
}

// mxKeys is, for split "mx", each row domain's primary MX host, looked
// up once per domain through the world's DNS server, as the manager's
// preparation does (wiring.PrimaryMX, not imported here: hack/compare keeps
// its own go.mod small); nil for other splits.
func mxKeys(split, dnsAddr string, rows []string) map[string]string {
	if split != "mx" {
		return nil
	}
	r := mxdns.New(mxdns.Config{Server: dnsAddr, Timeout: 5 * time.Second})
	out := map[string]string{}
	seen := map[string]bool{}
	start := time.Now()
	for _, row := range rows {
		d := rowDomain(row)
		if seen[d] {
			continue
		}
		seen[d] = true
		if res, err := r.Lookup(context.Background(), d); err == nil && res.Status == mxdns.OK && len(res.MX) > 0 {
			out[d] = res.MX[0].Host
		}
	}
	fmt.Fprintf(os.Stderr, "split mx: %d domains, %d resolved, %.2f s\n", len(seen), len(out), time.Since(start).Seconds())
	return out
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	l := strings.SplitAfter(s, "\n")
	return strings.Join(l[max(0, len(l)-n-1):], "")
}

func writeList(path string, rows []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{"email"})
	for _, r := range rows {
		cw.Write([]string{r})
	}
	cw.Flush()
	return errors.Join(cw.Error(), f.Close())
}

// readResult reads the worker's result: ev_status_code and ev_correction
// per row.
func readResult(path string, n int) (pred, raw []string, err error) {
	return readAnswers(path, true, n, 2, 5)
}

// readAnswers reads n answers from the CSV file at path (after a header
// line when header): the status code in column codeCol, a correction in
// corrCol.
func readAnswers(path string, header bool, n, codeCol, corrCol int) (pred, raw []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if header && len(recs) > 0 {
		recs = recs[1:]
	}
	if len(recs) != n {
		return nil, nil, fmt.Errorf("%s: %d answers, want %d", path, len(recs), n)
	}
	res, err := resultsOf(recs, codeCol, corrCol)
	if err != nil {
		return nil, nil, err
	}
	pred, raw = classifyOurs(res)
	return pred, raw, nil
}

// resultsOf reads our answers from CSV records: the status code in column
// codeCol and a suggested correction (may be empty) in column corrCol.
func resultsOf(recs [][]string, codeCol, corrCol int) ([]verify.Result, error) {
	res := make([]verify.Result, len(recs))
	for i, rec := range recs {
		code, err := strconv.Atoi(rec[codeCol])
		if err != nil {
			return nil, fmt.Errorf("row %d: %q", i+1, rec)
		}
		res[i].SetCode(verify.Code(code))
		if rec[corrCol] != "" {
			res[i].Corrections = []string{rec[corrCol]}
		}
	}
	return res, nil
}

// runOursSingle is the API's path: Verify per address within a deadline
// (GET /v5/ev defaults to 10 s), from a worker pool.
func runOursSingle(dnsAddr string, addrs []string, s settings) (pred, raw []string, st smtpprobe.Stats) {
	e, p := newEngine(dnsAddr, s, nil)
	res := make([]verify.Result, len(addrs))
	pool(len(addrs), s.concurrency, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), s.singleTimeout)
		res[i] = e.Verify(ctx, addrs[i], verify.Options{SMTP: true})
		cancel()
	})
	pred, raw = classifyOurs(res)
	return pred, raw, p.Stats()
}

var codeCategory = map[verify.Code]string{
	verify.CodeDeliverable:     truthDeliverable,
	verify.CodeCatchAll:        truthCatchAll,
	verify.CodeMailboxNotFound: truthMissing,
	verify.CodeMailboxFull:     truthFull,
	verify.CodeMailNotAccepted: truthPolicy,
	verify.CodeDomainNotFound:  truthNXDomain,
	verify.CodeDomainNoIP:      truthNoAddress,
	verify.CodeDomainNoMail:    truthNullMX,
	verify.CodeValidDomain:     truthUnconfirmed,
	verify.CodeTimeout:         truthTimeout,
}

func classifyOurs(res []verify.Result) (pred, raw []string) {
	pred = make([]string, len(res))
	raw = make([]string, len(res))
	for i, r := range res {
		raw[i] = strconv.Itoa(int(r.Code)) + " " + r.Code.String()
		c, ok := codeCategory[r.Code]
		switch {
		case r.Code == verify.CodeSpamTrap:
			pred[i] = truthDisposable
		case len(r.Corrections) > 0 && r.Status == verify.StatusInvalid:
			pred[i], raw[i] = truthTypo, raw[i]+" with a correction"
		case r.Code >= verify.CodeSyntaxError && r.Code <= verify.CodeUnquotedSpace:
			pred[i] = mailworldInvalid
		case ok:
			pred[i] = c
		case r.Status == verify.StatusInvalid || r.Status == verify.StatusTrap:
			pred[i] = predRejectOther
		default:
			pred[i] = predOther
		}
	}
	return pred, raw
}

// predRejectOther: our engine rejected the address before the network
// stages (lists, typos, syntax).
const predRejectOther = "rejected-offline"

func pool(n, workers int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
