package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

const (
	truthDeliverable = mailworld.TruthDeliverable
	truthMissing     = mailworld.TruthMissing
	truthFull        = mailworld.TruthFull
	truthCatchAll    = mailworld.TruthCatchAll
	truthGreylisted  = mailworld.TruthGreylisted
	truthNXDomain    = mailworld.TruthNXDomain
	truthNoAddress   = mailworld.TruthNoAddress
	truthNullMX      = mailworld.TruthNullMX
	truthPolicy      = mailworld.TruthPolicy
	truthTimeout     = mailworld.TruthTimeout
	truthUnconfirmed = mailworld.TruthUnconfirmed
	mailworldInvalid = mailworld.TruthInvalid
	truthDisposable  = mailworld.TruthDisposable
	truthTypo        = mailworld.TruthTypo
)

// categories in table order.
var categories = []string{
	truthDeliverable, truthMissing, truthFull, truthCatchAll, truthNXDomain, truthNoAddress,
	truthNullMX, truthPolicy, truthGreylisted, truthUnconfirmed, truthTimeout,
	truthDisposable, truthTypo, mailworldInvalid,
}

// paddedCategory is reported besides the truths: rows with white space
// around the address, judged on the trimmed address's truth.
const paddedCategory = "padded (any of the above)"

// expected is the category a perfect verifier reports: greylisted
// addresses are judged on their mailbox (the verdict after the window).
func expected(truth, underlying string) string {
	if truth == truthGreylisted {
		return underlying
	}
	return truth
}

// exactOK: the predicted category is the expected one. A host that never
// sent a byte (a tarpit, silent or hanging up, or a host refusing
// connections) must be reported as timeout (5: no answer), not unconfirmed
// (20: a host answered, the mailbox could not be confirmed).
// AfterShip's "no usable MX" (nomail) is credited for all three domain
// categories, which it cannot tell apart.
//
// A typo of a well-known provider is exact when rejected with a correction
// (ours) or, for AfterShip, which cannot suggest with its defaults, when
// rejected as having no usable MX (the typo domains do not exist); a row
// that is not an address is exact when rejected as such, with or without
// a correction.
func exactOK(truth, underlying, pred string) bool {
	e := expected(truth, underlying)
	switch {
	case truth == truthTypo:
		return pred == truthTypo || pred == predNoMail
	case truth == mailworldInvalid:
		return pred == mailworldInvalid || pred == truthTypo
	case pred == predNoMail:
		return e == truthNXDomain || e == truthNoAddress || e == truthNullMX
	}
	return pred == e
}

// verdict is what a sender does with the address.
func verdict(cat string) string {
	switch cat {
	case truthDeliverable:
		return "send"
	case truthMissing, truthFull, truthPolicy, truthNXDomain, truthNoAddress, truthNullMX, predNoMail, mailworldInvalid, predRejectOther,
		truthDisposable, truthTypo:
		return "drop"
	}
	return "unknown" // catchall, unconfirmed, timeout, other
}

type runResult struct {
	name    string
	pred    []string
	raw     []string
	wall    float64 // seconds
	cpu     float64 // verifier process CPU seconds
	world   worldReport
	dnsDial int64  // dials of the replaced net.DefaultResolver
	note    string // tool-specific counters
}

type score struct {
	n, exact, verdict int
}

func scoreRun(r *runResult, rows, truth, under []string) (per map[string]*score, total score, goodDropped, badSent int) {
	per = map[string]*score{}
	get := func(k string) *score {
		if per[k] == nil {
			per[k] = &score{}
		}
		return per[k]
	}
	for i := range truth {
		t := truth[i]
		ss := []*score{get(t), &total}
		if t != mailworldInvalid && strings.TrimFunc(rows[i], unicode.IsSpace) != rows[i] {
			ss = append(ss, get(paddedCategory))
		}
		p := r.pred[i]
		exact, tv := exactOK(t, under[i], p), verdict(expected(t, under[i]))
		for _, s := range ss {
			s.n++
			if exact {
				s.exact++
			}
			if tv == verdict(p) {
				s.verdict++
			}
		}
		switch {
		case tv == "send" && verdict(p) == "drop":
			goodDropped++
		case tv == "drop" && verdict(p) == "send":
			badSent++
		}
	}
	return
}

func pct(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
}

func printReport(w io.Writer, runs []*runResult, rows, truth, under []string, floor time.Duration) {
	type scored struct {
		per                 map[string]*score
		total               score
		goodDropped, badSen int
	}
	sc := make([]scored, len(runs))
	for i, r := range runs {
		per, tot, gd, bs := scoreRun(r, rows, truth, under)
		sc[i] = scored{per, tot, gd, bs}
	}
	greylisted := 0
	for _, t := range truth {
		if t == truthGreylisted {
			greylisted++
		}
	}

	fmt.Fprintf(w, "\n### Throughput\n\n| verifier | wall | rows/s | wall / greylisting floor (%v) | verifier CPU | CPU ms / 1k rows | world CPU |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", floor)
	for _, r := range runs {
		n := len(r.pred)
		ratio := "–"
		if greylisted > 0 {
			ratio = fmt.Sprintf("%.2f×", r.wall/floor.Seconds())
		}
		fmt.Fprintf(w, "| %s | %.1f s | %.0f | %s | %.2f s | %.0f | %.2f s |\n", r.name, r.wall, float64(n)/r.wall, ratio, r.cpu, 1e6*r.cpu/float64(n), r.world.CPUSecs)
	}

	fmt.Fprintf(w, "\n### Accuracy per ground-truth category (exact / send-drop-unknown verdict)\n\n| category | rows |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s exact | %s verdict |", r.name, r.name)
	}
	fmt.Fprintf(w, "\n| --- | ---: |%s\n", strings.Repeat(" ---: | ---: |", len(runs)))
	for _, c := range append(categories, paddedCategory) {
		n := 0
		if s := sc[0].per[c]; s != nil {
			n = s.n
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %d |", c, n)
		for i := range runs {
			s := sc[i].per[c]
			fmt.Fprintf(w, " %s | %s |", pct(s.exact, s.n), pct(s.verdict, s.n))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| **all** | %d |", sc[0].total.n)
	for i := range runs {
		fmt.Fprintf(w, " **%s** | **%s** |", pct(sc[i].total.exact, sc[i].total.n), pct(sc[i].total.verdict, sc[i].total.n))
	}
	fmt.Fprintf(w, "\n| good address dropped | |")
	for i := range runs {
		fmt.Fprintf(w, " %d | |", sc[i].goodDropped)
	}
	fmt.Fprintf(w, "\n| bad address sent | |")
	for i := range runs {
		fmt.Fprintf(w, " %d | |", sc[i].badSen)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "\n### What each verifier answered, per category (raw answer × rows)\n\n")
	for _, c := range categories {
		idx := []int{}
		for i, t := range truth {
			if t == c {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		fmt.Fprintf(w, "- **%s** (%d):", c, len(idx))
		for _, r := range runs {
			cnt := map[string]int{}
			for _, i := range idx {
				k := r.raw[i]
				if c == truthGreylisted {
					k = "[" + under[i] + "] " + k
				}
				cnt[k]++
			}
			fmt.Fprintf(w, " %s: %s;", r.name, topCounts(cnt, 4))
		}
		fmt.Fprintln(w)
	}

	if runs[0].world.Real != nil {
		printRealLoad(w, runs)
		return
	}
	fmt.Fprintf(w, "\n### Load on the mail world\n\n| verifier | SMTP connections | peak concurrent (world) | max concurrent on one host | hosts above 2 at once | max new conns in 1 s on one host | 421 too many conns | EHLO | MAIL | RCPT | RSET | DATA | DNS queries | replies held back (Postfix errors) | 421 too many errors | flow delays | non-mail drops | %s |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n", "notes")
	for _, r := range runs {
		s := r.world.Stats
		note := r.note
		if strings.Contains(note, "\n") {
			note = "see below"
		}
		above := 0
		for _, h := range s.Hosts {
			if h.MaxConcurrent > 2 {
				above++
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.name, s.Connections, s.PeakConcurrent, s.MaxConcurrent, above, s.MaxPerSecond, s.Rejected, s.EHLO,
			s.MAIL, s.RCPT, s.RSET, s.DATA, s.DNSQueries, s.Slowed, s.TooManyErrors, s.FlowDelays, s.NonmailDrops, note)
	}
	for _, r := range runs {
		if strings.Contains(r.note, "\n") {
			fmt.Fprintf(w, "\n%s said on stderr:\n\n```\n%s```\n", r.name, r.note)
		}
	}
}

func topCounts(m map[string]int, k int) string {
	type kv struct {
		k string
		v int
	}
	var l []kv
	for a, b := range m {
		l = append(l, kv{a, b})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
	var parts []string
	for i, e := range l {
		if i == k {
			rest := 0
			for _, e := range l[k:] {
				rest += e.v
			}
			parts = append(parts, fmt.Sprintf("others ×%d", rest))
			break
		}
		parts = append(parts, fmt.Sprintf("`%s` ×%d", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}

// shape names the feature of an address's domain that matters to a
// verifier, for explaining errors.
func shape(d mailworld.Domain) string {
	var f []string
	switch {
	case d.NXDomain:
		return "NXDOMAIN"
	case d.NullMX:
		return "null MX"
	case d.NoAddress:
		return "no MX, no A"
	case d.NoMX:
		f = append(f, "implicit MX (A only)")
	}
	if d.Provider != "" {
		f = append(f, "provider "+d.Provider)
	}
	if d.DefaultBehaviour == mailworld.CatchAll {
		f = append(f, "catch-all")
	}
	for _, x := range []struct {
		on   bool
		name string
	}{
		{d.Greylist > 0, "greylisting"}, {d.PolicyReject, "policy reject"}, {d.Tarpit, "tarpit"},
		{d.DropConnection, "drop at EHLO"}, {d.DropAtRCPT, "drop at RCPT"}, {d.SecondRCPT452, "452 on 2nd RCPT"},
		{d.PrimaryDown, "primary MX down"}, {d.MaxConns > 0, fmt.Sprintf("max %d conns", d.MaxConns)},
		{d.RcptLimit > 0, fmt.Sprintf("%d RCPTs a connection", d.RcptLimit)}, {d.EqualPrefs, "MX hosts of equal preference"},
	} {
		if x.on {
			f = append(f, x.name)
		}
	}
	if len(f) == 0 {
		return "plain"
	}
	return strings.Join(f, ", ")
}

// syntheticShapes names a row's domain shape in the synthetic world.
func syntheticShapes(doms []mailworld.Domain) func(i int, dom string) string {
	byName := map[string]mailworld.Domain{}
	for _, d := range doms {
		byName[d.Name] = d
	}
	return func(_ int, dom string) string { return shape(byName[dom]) }
}

// printByShape is exact accuracy per shape (the real world: the serving
// host's kind, or the domain's DNS shape).
func printByShape(w io.Writer, runs []*runResult, truth, under, shapes []string) {
	var keys []string
	n := map[string]int{}
	for _, s := range shapes {
		if n[s] == 0 {
			keys = append(keys, s)
		}
		n[s]++
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "\n### Exact accuracy per host kind / DNS shape\n\n| host kind or shape | rows |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s |", r.name)
	}
	fmt.Fprintf(w, "\n| --- | ---: |%s\n", strings.Repeat(" ---: |", len(runs)))
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %d |", k, n[k])
		for _, r := range runs {
			ok := 0
			for i, s := range shapes {
				if s == k && exactOK(truth[i], under[i], r.pred[i]) {
					ok++
				}
			}
			fmt.Fprintf(w, " %s |", pct(ok, n[k]))
		}
		fmt.Fprintln(w)
	}
}

// printErrors lists, per verifier, the exact-scoring errors grouped by the
// domain's shape, truth and answer.
func printErrors(w io.Writer, runs []*runResult, addrs, truth, under []string, shapeOf func(i int, dom string) string) {
	fmt.Fprintf(w, "\n### Errors by domain shape (exact scoring)\n")
	for _, r := range runs {
		cnt := map[string]int{}
		total := 0
		for i, a := range addrs {
			if exactOK(truth[i], under[i], r.pred[i]) {
				continue
			}
			total++
			dom := strings.ToLower(strings.TrimFunc(a[strings.LastIndexByte(a, '@')+1:], unicode.IsSpace))
			key := fmt.Sprintf("%s | %s | `%s`", shapeOf(i, dom), expected(truth[i], under[i]), r.raw[i])
			cnt[key]++
		}
		fmt.Fprintf(w, "\n%s: %d errors\n\n", r.name, total)
		if total == 0 {
			continue
		}
		fmt.Fprintf(w, "| domain shape | expected | answer | rows |\n| --- | --- | --- | ---: |\n")
		type kv struct {
			k string
			v int
		}
		var l []kv
		for k, v := range cnt {
			l = append(l, kv{k, v})
		}
		sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
		for _, e := range l {
			fmt.Fprintf(w, "| %s | %d |\n", e.k, e.v)
		}
	}
}

// printRealLoad is the real world's view of each run, from the servers'
// own logs: sessions and RCPTs per verifier, and what the servers did
// about them, in total and per host.
func printRealLoad(w io.Writer, runs []*runResult) {
	fmt.Fprintf(w, "\n### Load on the real servers (their logs)\n\n"+
		"| verifier | sessions | RCPTs (accepted) | MAIL | RSET | queue files (flow-control tokens) | anvil 421 (rate / conns) | too many errors | greylisted (postgrey greylist / pass) | postscreen new / old / pregreet | Exim too many nonmail | Exim refused | world CPU | notes |\n"+
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range runs {
		c := r.world.Real
		t := c.Total
		note := r.note
		if strings.Contains(note, "\n") {
			note = "see below"
		}
		fmt.Fprintf(w, "| %s | %d | %d (%d) | %d | %d | %d | %d (%d / %d) | %d | %d (%d / %d) | %d / %d / %d | %d | %d | %.2f s | %s |\n",
			r.name, t.Sessions, t.RCPT, t.RCPTAccepted, t.MAIL, t.RSET, t.QueueFiles, t.AnvilRefused, t.AnvilRate, t.AnvilCount,
			t.TooManyErrors, t.Greylisted, c.PostgreyGreylist, c.PostgreyPass, t.PostscreenPassNew, t.PostscreenPassOld, t.Pregreet,
			t.TooManyNonmail, t.EximRefused, r.world.CPUSecs, note)
	}
	fmt.Fprintf(w, "\nPer host: sessions / RCPTs / anvil 421 / too many errors / Exim too many nonmail\n\n| host | kind |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s |", r.name)
	}
	fmt.Fprintf(w, "\n| --- | --- |%s\n", strings.Repeat(" --- |", len(runs)))
	var hosts []string
	for h := range runs[0].world.Real.Hosts {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		fmt.Fprintf(w, "| %s | %s |", h, runs[0].world.Real.Hosts[h].Kind)
		for _, r := range runs {
			if hc := r.world.Real.Hosts[h]; hc != nil {
				fmt.Fprintf(w, " %d / %d / %d / %d / %d |", hc.Sessions, hc.RCPT, hc.AnvilRefused, hc.TooManyErrors, hc.TooManyNonmail)
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
	for _, r := range runs {
		if strings.Contains(r.note, "\n") {
			fmt.Fprintf(w, "\n%s said on stderr:\n\n```\n%s```\n", r.name, r.note)
		}
	}
}
