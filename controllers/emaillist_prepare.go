package controllers

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// errSourceMissing marks a source that does not exist (yet).
var errSourceMissing = errors.New("source missing")

// prepare stages the list's input and plans its shards. done is false when
// the list must wait (for its source) or failed.
func (r *EmailListReconciler) prepare(ctx context.Context, list *listsv1.EmailList) (res ctrl.Result, done bool, err error) {
	svc, err := r.Registry.Lookup(string(list.Spec.Service))
	if err != nil {
		r.fail(list, ReasonServiceUnavailable, r.Store.Redact(err))
		return ctrl.Result{}, false, nil
	}
	keys := blobstore.ListKeys{UID: string(list.UID)}
	src, err := r.resolveSource(ctx, list, keys)
	if errors.Is(err, errSourceMissing) {
		if after, wait := sourceGrace(clockNow(r.Clock), list.CreationTimestamp.Time, r.SourceGrace, r.PollInterval); wait {
			r.setProgressing(list, ReasonWaitingForSource, r.Store.Redact(err))
			return ctrl.Result{RequeueAfter: after}, false, nil
		}
		r.fail(list, ReasonSourceMissing, r.Store.Redact(err))
		return ctrl.Result{}, false, nil
	}
	var refused *sourceRefusedError
	if errors.As(err, &refused) {
		r.fail(list, ReasonSourceNotAllowed, r.Store.Redact(refused))
		return ctrl.Result{}, false, nil
	}
	if pipeline.IsBadInput(err) {
		r.fail(list, ReasonInvalidInput, r.Store.Redact(err))
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, r.retryPreparing(list, err)
	}
	// Known before the file is checked, so a list failed for bad input
	// still reports how large its file was.
	if size, err := r.Store.Size(ctx, src.Key); err == nil {
		list.Status.SizeBytes = size
	}

	dialect, err := list.Spec.Format.Dialect()
	if err != nil { // the same reason and message Prepare gave before
		r.fail(list, ReasonInvalidInput, r.Store.Redact(err))
		return ctrl.Result{}, false, nil
	}
	req := pipeline.Request{Source: src, Dialect: dialect, Service: string(list.Spec.Service), MaxAge: list.Spec.MaxAge(),
		HistoryTenant: r.Access.historyTenant(list), EscapeFormulas: list.Spec.Format.EscapeFormulas}
	plan, err := pipeline.Prepare(ctx, r.Store, keys, req, svc, r.Pipeline)
	if pipeline.IsBadInput(err) {
		r.fail(list, ReasonInvalidInput, r.Store.Redact(err))
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, r.retryPreparing(list, fmt.Errorf("prepare: %w", err))
	}
	list.Status.SizeBytes = plan.SizeBytes
	list.Status.Records = plan.Records
	list.Status.Shards = int32(len(plan.Shards))
	if m := plan.MXRouting; m != nil {
		// What routing by MX host cost (bounded by pipeline.mxLookupTimeout
		// and mxLookupBudget).
		logf.FromContext(ctx).Info("shards cut by MX host", "domains", m.Domains, "resolved", m.Resolved, "failed", m.Failed,
			"skipped", m.Skipped, "mxHosts", m.Hosts, "lookupSeconds", m.Seconds, "overflow", m.Overflow)
	}
	setProgress(list, 0, plan.Records)
	return ctrl.Result{}, true, nil
}

// retryPreparing says in the list's status that preparing it failed and is
// retried (with backoff: err goes back to the controller, which logs it
// whole), naming the condition (a full store, say) but not the server's
// paths, so no list waits in Pending without saying why.
func (r *EmailListReconciler) retryPreparing(list *listsv1.EmailList, err error) error {
	r.setProgressing(list, ReasonPreparing, "preparing the list failed and is retried: "+r.Store.Redact(err))
	return err
}
