package controllers_test

// The Job path load run: skipped unless EMAILDATA_LOAD=1, so `make test`
// stays fast. Figures and the command are in docs/benchmarks.md:
//
//	EMAILDATA_LOAD=1 KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 \
//	    go test -count=1 -timeout 60m -run TestLoadJobPath -v ./controllers/

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// cpu is the CPU time of this process (the managers, the test node and
// the test), of its waited-for children (the worker processes), and of its
// running children (kube-apiserver, etcd, kube-controller-manager,
// kube-scheduler).
type cpu struct{ self, workers, plane time.Duration }

func sampleCPU() cpu {
	return cpu{self: cputime.Self(), workers: cputime.Children(), plane: cputime.Running()}
}

func (c cpu) sub(o cpu) cpu { return cpu{c.self - o.self, c.workers - o.workers, c.plane - o.plane} }

// TestLoadJobPath runs one large list (EMAILDATA_LOAD_ROWS, default 2M
// rows) with 1, 2 and 4 shards, first in-process (the local executor),
// then on the Job path, with the same pipeline settings and offline
// verification, and reports wall time and CPU of each, and the Job path's
// overhead. Both results must be byte-identical.
func TestLoadJobPath(t *testing.T) {
	if os.Getenv("EMAILDATA_LOAD") != "1" {
		t.Skip("load benchmark; set EMAILDATA_LOAD=1 to run it")
	}
	rows := 2_000_000
	if v := os.Getenv("EMAILDATA_LOAD_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	input := bigList(rows)
	t.Logf("list: %d rows, %.1f MB; GOMAXPROCS of the worker processes: all %d cores", rows, float64(len(input))/1e6, runtime.NumCPU())
	for _, shards := range []int{1, 2, 4} {
		pc := pipeline.Config{
			Limits:     baseOptions.Pipeline.Limits,
			ShardBytes: int64(len(input)/shards + 1),
			MaxShards:  shards,
		}
		var results [2][]byte
		for i, executor := range []string{operator.ExecutorLocal, operator.ExecutorJob} {
			ns := uniqueName(fmt.Sprintf("load-%s-%d", executor, shards))
			workers := ns + "-workers"
			for _, n := range []string{ns, workers} {
				create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
			}
			create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: workerSA}})
			o := jobOptions(ns, workers)
			if executor == operator.ExecutorLocal {
				o = baseOptions
				o.Executor, o.WatchNamespaces, o.LocalConcurrency = operator.ExecutorLocal, []string{ns}, shards
			}
			o.Pipeline = pc
			o.PollInterval = time.Second
			stop := startManager(t, o)

			key := putUpload(t, input)
			name := uniqueName("load")
			before, load := sampleCPU(), cputime.LoadAverage()
			start := time.Now()
			create(t, builders.MakeEmailList(ns, name).APIUpload(key, testTenant).Header().EmailColumn(3).Obj())
			l := waitPhaseWithin(t, ns, name, listsv1.PhaseResults, 20*time.Minute)
			wall := time.Since(start)
			used := sampleCPU().sub(before)
			stop()
			if int(l.Status.Shards) != shards {
				t.Fatalf("%d shards, want %d", l.Status.Shards, shards)
			}
			results[i] = readResult(t, l)
			t.Logf("RESULT executor=%s shards=%d wall=%.1fs cpu_self=%.1fs cpu_workers=%.1fs cpu_control_plane=%.1fs cpu_total=%.1fs rows/s=%.0f loadavg_before=%s",
				executor, shards, wall.Seconds(), used.self.Seconds(), used.workers.Seconds(), used.plane.Seconds(),
				(used.self + used.workers + used.plane).Seconds(), float64(rows)/wall.Seconds(), load)
		}
		if !bytes.Equal(results[0], results[1]) {
			t.Errorf("shards=%d: Job path result differs from the in-process one", shards)
		}
	}
}
