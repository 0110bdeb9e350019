package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// podEnd is one test node "container ended" log line.
type podEnd struct {
	Time     time.Time `json:"time"`
	Pod      string    `json:"pod"`
	Code     int       `json:"exit_code"`
	Reason   string    `json:"reason"`
	Peak     int64     `json:"peak_rss_bytes"`
	From     string    `json:"peak_from"`
	Limit    int64     `json:"memory_limit_bytes"`
	User     float64   `json:"cpu_user_seconds"`
	System   float64   `json:"cpu_system_seconds"`
	Duration float64   `json:"seconds"`
}

// podEnds reads the container ended lines of the stack's JSON log.
func podEnds(path string) ([]podEnd, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []podEnd
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"container ended"`) {
			continue
		}
		var p podEnd
		if err := json.Unmarshal(line, &p); err != nil {
			return nil, fmt.Errorf("%s: %w: %s", path, err, line)
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// report is one run's figures.
type report struct {
	shards, listShards    int
	list, store           string
	rows, bytes           int64
	loadBefore, loadAfter string
	upload                time.Duration
	uploadPeak, idleRSS   int64
	wall, processing      time.Duration
	created, results      time.Time
	download              time.Duration
	cpu                   cpuTable
	stackPeak             int64
	childPeaks            map[string]int64
	pods                  []podEnd
	podStates             map[string]int
	sha                   [32]byte
	resultBytes           int64
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n== %d shards (--max-shards %d): %s, %d rows, %.1f MB; load average %s before, %s after\n",
		r.listShards, r.shards, r.list, r.rows, float64(r.bytes)/1e6, r.loadBefore, r.loadAfter)
	fmt.Fprintf(w, "upload (REST, multipart, into the %s store): %.1f s, %.0f MB/s; stack RSS %s before it, peak %s during it\n",
		r.store, r.upload.Seconds(), float64(r.bytes)/1e6/r.upload.Seconds(), mib(r.idleRSS), mib(r.uploadPeak))
	fmt.Fprintf(w, "created -> Results: wall %.1f s (Processing seen at %.1f s); %.0f rows/s\n",
		r.wall.Seconds(), r.processing.Seconds(), float64(r.rows)/r.wall.Seconds())
	if first, last, ok := r.podSpan(); ok {
		fmt.Fprintf(w, "  phases: preparation and Job creation %.1f s; first pod start %.1f s to last pod end %.1f s (%.1f s); merge and status %.1f s\n",
			r.processing.Seconds(), first.Sub(r.created).Seconds(), last.Sub(r.created).Seconds(), last.Sub(first).Seconds(), r.results.Sub(last).Seconds())
	}
	total := r.cpu.total()
	fmt.Fprintf(w, "CPU created -> Results: %.1f s in all (%.0f rows per CPU-second)\n", total.Seconds(), float64(r.rows)/total.Seconds())
	names := make([]string, 0, len(r.cpu))
	for k := range r.cpu {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return r.cpu[names[i]] > r.cpu[names[j]] })
	for _, k := range names {
		fmt.Fprintf(w, "  %-40s %7.1f s  %4.1f%%\n", k, r.cpu[k].Seconds(), 100*r.cpu[k].Seconds()/total.Seconds())
	}
	fmt.Fprintf(w, "peak RSS created -> Results: stack (manager, REST API, test node) %s", mib(r.stackPeak))
	for _, k := range slices.Sorted(maps.Keys(r.childPeaks)) {
		fmt.Fprintf(w, "; %s %s", k, mib(r.childPeaks[k]))
	}
	fmt.Fprintln(w)
	r.printPods(w)
	fmt.Fprintf(w, "result: %d bytes, SHA-256 %x, downloaded in %.1f s\n", r.resultBytes, r.sha, r.download.Seconds())
}

func (r *report) printPods(w io.Writer) {
	if len(r.pods) == 0 {
		fmt.Fprintln(w, "pods: no container ended lines in the stack's log")
		return
	}
	var lo, hi, limit int64 = 1 << 62, 0, 0
	var cpu, over float64
	from := map[string]int{}
	for _, p := range r.pods {
		lo, hi, limit = min(lo, p.Peak), max(hi, p.Peak), max(limit, p.Limit)
		cpu += p.User + p.System
		from[p.From]++
		if p.Limit > 0 && p.Peak > p.Limit {
			over++
		}
	}
	fmt.Fprintf(w, "pods: %d ended %v; peak RSS %s to %s (limit %s; %.0f over it; peaks from %v); pods' own CPU %.1f s\n",
		len(r.pods), r.podStates, mib(lo), mib(hi), mib(limit), over, from, cpu)
	peaks := make([]string, 0, len(r.pods))
	for _, p := range r.pods {
		peaks = append(peaks, fmt.Sprintf("%.0f", float64(p.Peak)/(1<<20)))
	}
	fmt.Fprintf(w, "  each pod's peak (MiB, in the order they ended): %s\n", strings.Join(peaks, " "))
}

// podSpan is when the first pod started and the last one ended.
func (r *report) podSpan() (first, last time.Time, ok bool) {
	for _, p := range r.pods {
		start := p.Time.Add(-time.Duration(p.Duration * float64(time.Second)))
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if p.Time.After(last) {
			last = p.Time
		}
	}
	return first, last, len(r.pods) > 0
}
