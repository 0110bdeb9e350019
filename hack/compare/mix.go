package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/verify"
)

// The "ours-mix" tool is issue 22's "3 lists at once plus /v5/ev load from
// 2 API processes on the same providers": one world, its rows dealt out to
// -lists different lists (every list has rows of every provider) and to
// -api-procs processes answering GET /v5/ev-style single-address
// verifications, all running at once and sharing -fleet-url (or none).
//
// The API processes are this binary re-executed with -api-child: the
// engine ours-single uses (GET /v5/ev's: Verify per address within its
// deadline, the API's timeouts), with the fleet backend wired as
// internal/wiring wires it for cmd/api. The real cmd/api is not run: it
// needs a kube-apiserver for its API keys and list counter, which a load
// run on this machine does not have; the HTTP layer in front of Verify
// takes no part in per-host limits.

// mixSettings: the ours-mix participants.
type mixSettings struct {
	lists, apiProcs, apiRows, apiConc int
}

// participant is one OS process of the mix.
type participant struct {
	name   string
	cmd    *exec.Cmd
	out    string
	idx    []int // its rows (indices into the world's rows)
	api    bool
	stderr strings.Builder
	wall   float64
	cpu    float64
	err    error
}

// dealMix gives the API processes apiRows rows spread evenly over the list
// (so over the providers), apiRows/apiProcs each, and deals the others out
// to the lists in turn: different rows over the same domains.
func dealMix(n int, m mixSettings) (lists, apis [][]int) {
	lists, apis = make([][]int, m.lists), make([][]int, m.apiProcs)
	isAPI := make([]bool, n)
	k := min(m.apiRows, n)
	if m.apiProcs == 0 {
		k = 0
	}
	for j := 0; j < k; j++ {
		i := j * n / k
		isAPI[i] = true
		apis[j%m.apiProcs] = append(apis[j%m.apiProcs], i)
	}
	l := 0
	for i := 0; i < n; i++ {
		if !isAPI[i] {
			lists[l%m.lists] = append(lists[l%m.lists], i)
			l++
		}
	}
	return lists, apis
}

// runOursMix runs the mix and returns the answers for every row, the
// participants' CPU and a table of each one's wall and accuracy.
func runOursMix(dnsAddr string, rows, truth, under []string, s settings, m mixSettings) (pred, raw []string, cpu float64, note string, err error) {
	dir, err := os.MkdirTemp("", "compare-mix-")
	if err != nil {
		return nil, nil, 0, "", err
	}
	defer os.RemoveAll(dir)
	bin, err := workerBinary(dir, s)
	if err != nil {
		return nil, nil, 0, "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, 0, "", err
	}
	lists, apis := dealMix(len(rows), m)
	procs := max(1, s.procs)
	seats := m.lists*procs + m.apiProcs
	var ps []*participant
	for l, lrows := range lists {
		sub := make([]string, len(lrows))
		for k, ix := range lrows {
			sub[k] = rows[ix]
		}
		for p, part := range splitRows(sub, procs, s.split, mxKeys(s.split, dnsAddr, sub)) {
			pr := &participant{name: fmt.Sprintf("list %d", l+1), out: filepath.Join(dir, fmt.Sprintf("result%d-%d.csv", l, p))}
			if procs > 1 {
				pr.name += fmt.Sprintf(" part %d", p+1)
			}
			addrs := make([]string, len(part))
			for k, ix := range part {
				pr.idx = append(pr.idx, lrows[ix])
				addrs[k] = sub[ix]
			}
			in := filepath.Join(dir, fmt.Sprintf("list%d-%d.csv", l, p))
			if err := writeList(in, addrs); err != nil {
				return nil, nil, 0, "", err
			}
			cmd, err := workerCmd(bin, in, pr.out, dnsAddr, s, len(ps), seats)
			if err != nil {
				return nil, nil, 0, "", err
			}
			pr.cmd = cmd
			ps = append(ps, pr)
		}
	}
	for a, arows := range apis {
		pr := &participant{name: fmt.Sprintf("API %d", a+1), out: filepath.Join(dir, fmt.Sprintf("api%d.out", a)), idx: arows, api: true}
		in := filepath.Join(dir, fmt.Sprintf("api%d.in", a))
		addrs := make([]string, len(arows))
		for k, ix := range arows {
			addrs[k] = rows[ix]
		}
		if err := os.WriteFile(in, []byte(strings.Join(addrs, "\n")+"\n"), 0o600); err != nil {
			return nil, nil, 0, "", err
		}
		pr.cmd = exec.Command(exe, "-api-child", "-api-in", in, "-api-out", pr.out, "-api-dns", dnsAddr,
			"-port", strconv.Itoa(s.port), "-concurrency", strconv.Itoa(m.apiConc), "-single-timeout", s.singleTimeout.String(),
			"-greylist-retry", s.greylistRetry.String(), "-fleet-url", s.fleetURL,
			"-api-seat", strconv.Itoa(len(ps)), "-api-seats", strconv.Itoa(seats))
		ps = append(ps, pr)
	}
	var wg sync.WaitGroup
	for _, pr := range ps {
		pr.cmd.Stderr = &pr.stderr
		t0 := time.Now()
		if err := pr.cmd.Start(); err != nil {
			return nil, nil, 0, "", fmt.Errorf("%s: %w", pr.name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pr.cmd.Wait(); err != nil {
				pr.err = fmt.Errorf("%s: %w: %s", pr.name, err, pr.stderr.String())
			}
			pr.wall = time.Since(t0).Seconds()
			if ru, ok := pr.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				pr.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			}
		}()
	}
	wg.Wait()
	var errs []error
	for _, pr := range ps {
		errs = append(errs, pr.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, 0, "", err
	}
	pred, raw = make([]string, len(rows)), make([]string, len(rows))
	var tab strings.Builder
	tab.WriteString("\n### Participants\n\n| participant | rows | wall | CPU | accuracy (exact) | its SMTP counts | its DNS counts | its fleet backend |\n| --- | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
	for _, pr := range ps {
		var p, r []string
		if pr.api {
			p, r, err = readAPIResult(pr.out, len(pr.idx))
		} else {
			p, r, err = readResult(pr.out, len(pr.idx))
		}
		if err != nil {
			return nil, nil, 0, "", fmt.Errorf("%s: %w", pr.name, err)
		}
		ok := 0
		for k, ix := range pr.idx {
			pred[ix], raw[ix] = p[k], r[k]
			if exactOK(truth[ix], under[ix], p[k]) {
				ok++
			}
		}
		cpu += pr.cpu
		log := pr.stderr.String()
		fmt.Fprintf(&tab, "| %s | %d | %.1f s | %.2f s | %s | %s | %s | %s |\n", pr.name, len(pr.idx), pr.wall, pr.cpu, pct(ok, len(pr.idx)),
			logLine(log, "smtp: ", "prober: "), logLine(log, "dns: "), logLine(log, "fleet: ", "fleet mode "))
	}
	return pred, raw, cpu, tab.String(), nil
}

// logLine is the rest of a participant's first log line holding one of
// the markers: the worker's --stats lines ("smtp: ", "dns: ", "fleet: "),
// the API child's ("prober: ", "fleet mode ", a change of the fleet's
// mode).
func logLine(text string, markers ...string) string {
	for _, l := range strings.Split(text, "\n") {
		for _, m := range markers {
			if i := strings.Index(l, m); i >= 0 {
				return strings.TrimSpace(l[i+len(m):])
			}
		}
	}
	return "–"
}

// readAPIResult reads an API child's answers: code and correction a line.
func readAPIResult(path string, n int) (pred, raw []string, err error) {
	return readAnswers(path, false, n, 0, 1)
}

// apiChild settings.
type apiChild struct {
	in, out, dns string
	seat, seats  int
}

// runAPIChild is one API process of the mix: GET /v5/ev's engine path
// (newEngine, the API's timeouts and host penalty TTL) on the fleet backend
// as internal/wiring.NewEngine gives it to cmd/api with --fleet-url (the
// fleet's limits and learnt state for the prober, the history on the same
// Redis is left out: the mix's rows are disjoint, so it could only be
// written, never read). Each address is verified within -single-timeout,
// -concurrency at a time; the answers go to -api-out in input order.
func runAPIChild(c apiChild, s settings) error {
	b, err := os.ReadFile(c.in)
	if err != nil {
		return err
	}
	addrs := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var f *fleet.Fleet
	if s.fleetURL != "" {
		f, err = fleet.Open(ctx, s.fleetURL, fleet.Options{LeaseTTL: 5 * time.Second, Share: fleet.Share{Seat: c.seat, Seats: max(1, c.seats)}})
		if err != nil {
			return fmt.Errorf("-fleet-url: %w", err)
		}
		defer f.Close()
		f.OnMode = func(m fleet.Mode, why string) { log.Printf("fleet mode %s: %s", m, why) }
	}
	e, p := newEngine(c.dns, s, f)
	if f != nil {
		e.Reporters = append(e.Reporters, f)
	}
	res := make([]verify.Result, len(addrs))
	pool(len(addrs), s.concurrency, func(i int) {
		ctx, cancel := context.WithTimeout(ctx, s.singleTimeout)
		res[i] = e.Verify(ctx, addrs[i], verify.Options{SMTP: true})
		cancel()
	})
	of, err := os.Create(c.out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(of)
	cw := csv.NewWriter(w)
	for _, r := range res {
		corr := ""
		if len(r.Corrections) > 0 {
			corr = r.Corrections[0]
		}
		_ = cw.Write([]string{strconv.Itoa(int(r.Code)), corr})
	}
	cw.Flush()
	if err := errors.Join(cw.Error(), w.Flush(), of.Close()); err != nil {
		return err
	}
	failed := 0
	for _, r := range res {
		if r.Code == verify.CodeSystemError {
			failed++
		}
	}
	log.Printf("dns: %d lookups failed (999 system error)", failed)
	st := p.Stats()
	log.Printf("%d addresses; prober: %d dials, %d sessions, %d catch-all probes, %d deferred (4xx)", len(addrs), st.Dials, st.Sessions, st.CatchAllProbes, st.Deferred)
	return nil
}
