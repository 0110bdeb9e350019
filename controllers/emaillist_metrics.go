package controllers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// managerMetrics are the manager's emaildata_ metrics, registered once per
// process with controller-runtime's registry (served on the manager's
// metrics endpoint beside its own).
var managerMetrics = sync.OnceValue(func() *metrics.Manager {
	m := metrics.NewManager()
	if err := m.Register(ctrlmetrics.Registry); err != nil {
		panic(err) // duplicate names: a programming error
	}
	return m
})

// phases are the EmailList phases the Lists gauge reports, zeros included.
var phases = []listsv1.Phase{listsv1.PhasePending, listsv1.PhaseProcessing, listsv1.PhaseProcessed, listsv1.PhaseResults, listsv1.PhaseFailed}

// exportListPhases makes the Lists gauge count c's EmailLists (an informer
// cache: no API request per scrape) at each scrape.
func exportListPhases(c client.Reader) {
	managerMetrics().SetListPhases(func() map[string]float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out := make(map[string]float64, len(phases))
		for _, p := range phases {
			out[string(p)] = 0
		}
		var lists listsv1.EmailListList
		if err := c.List(ctx, &lists); err != nil {
			return nil
		}
		for _, l := range lists.Items {
			if p := l.Status.Phase; p != "" {
				out[string(p)]++
			} else {
				out[string(listsv1.PhasePending)]++
			}
		}
		return out
	})
}

// recordFinished adds a list's run to the metrics when this reconcile has
// just stored its first final phase: called after a successful status
// patch, so each list is counted once (a conflicting patch is retried and
// counted by the retry). Rows, shards, verdicts and engine counters come
// from the shard summaries the workers left (the Job and local executors
// alike).
func (r *EmailListReconciler) recordFinished(ctx context.Context, orig, list *listsv1.EmailList) {
	if isTerminal(orig.Status.Phase) || !isTerminal(list.Status.Phase) {
		return
	}
	o := metrics.ListOutcome{
		Service: string(list.Spec.Service),
		Phase:   string(list.Status.Phase),
		Seconds: clockNow(r.Clock).Sub(list.CreationTimestamp.Time).Seconds(),
		Engine:  map[string]float64{},
	}
	if list.Status.Phase == listsv1.PhaseFailed {
		o.Reason = ReasonProcessingFailed
		if c := meta.FindStatusCondition(list.Status.Conditions, listsv1.ConditionReady); c != nil {
			o.Reason = c.Reason
		}
	}
	if list.Status.Shards > 0 {
		if err := addShards(ctx, r.Store, blobstore.ListKeys{UID: string(list.UID)}, &o); err != nil {
			logf.FromContext(ctx).V(1).Info("shard summaries not counted in metrics", logging.KeyError, err.Error())
		}
	}
	managerMetrics().ListFinished(o)
	r.noteHistoryKey(list, o.Engine)
}

// ReasonHistoryKeyMismatch: a list's shards found the verification history
// kept under another key, and verified without it.
const ReasonHistoryKeyMismatch = "HistoryKeyMismatch"

// noteHistoryKey warns on a finished list whose shards' key checks found
// the verification history kept under another key (evhistory.CheckKey):
// they probed every address, and the operator must give every process the
// same HISTORY_KEY. The counts come from the shard summaries, so Job pods
// and the local executor alike are heard.
func (r *EmailListReconciler) noteHistoryKey(list *listsv1.EmailList, engine map[string]float64) {
	if n := engine[evhistory.CounterKeyMismatches]; n > 0 {
		emit(r.Recorder, list, corev1.EventTypeWarning, ReasonHistoryKeyMismatch,
			"the verification history was kept under another key than its shards' (%.0f key checks): they verified without it, "+
				"probing every address; give the manager, the API and the workers the same HISTORY_KEY and --history-scope", n)
	}
}

// addShards adds the finished shards' summaries to o.
func addShards(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, o *metrics.ListOutcome) error {
	plan, err := pipeline.LoadPlan(ctx, store, keys)
	if err != nil {
		return err
	}
	sums, err := pipeline.FinishedSummaries(ctx, store, keys, plan)
	if err != nil {
		return err
	}
	o.ShardsSucceeded, o.ShardsFailed = len(sums), len(plan.Shards)-len(sums)
	o.StatusCodes = map[string]int64{}
	for _, s := range sums {
		o.Rows += s.Rows
		for code, n := range s.Reporting["status_code"] {
			o.StatusCodes[code] += n
		}
		for k, v := range s.Counters {
			o.Engine[k] += v
		}
	}
	return nil
}
