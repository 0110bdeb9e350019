package controllers

import (
	"context"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// CallbackConfig configures completion callbacks.
type CallbackConfig struct {
	// Client must come from callback.Policy.Client, which guards against SSRF
	// at connect time.
	Client  *http.Client
	Backoff callback.Backoff
	// Timeout bounds one attempt.
	Timeout time.Duration
}

// reconcileCallback POSTs the callback once when the list first reaches
// Processed or Results, one attempt per reconcile, retrying with backoff
// until the attempts run out. The outcome is recorded in status.
func (r *EmailListReconciler) reconcileCallback(ctx context.Context, orig, list *listsv1.EmailList) (ctrl.Result, error) {
	phase := orig.Status.Phase
	if list.Spec.CallbackURL == "" || (phase != listsv1.PhaseProcessed && phase != listsv1.PhaseResults) {
		return ctrl.Result{}, nil
	}
	cb := list.Status.Callback
	if cb == nil {
		cb = &listsv1.CallbackStatus{State: listsv1.CallbackPending}
		list.Status.Callback = cb
	}
	if cb.State != listsv1.CallbackPending {
		return ctrl.Result{}, nil
	}
	if cb.LastAttemptAt != nil {
		wait := r.Callbacks.Backoff.Delay(int(cb.Attempts)) - clockNow(r.Clock).Sub(cb.LastAttemptAt.Time)
		if wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}

	timeout := r.Callbacks.Timeout
	if timeout <= 0 {
		timeout = callback.DefaultTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := callback.Deliver(actx, r.Callbacks.Client, list.Spec.CallbackURL, callback.Payload{
		ListID: list.Status.ListID, Status: string(phase), Name: list.Spec.Format.Name,
	})
	now := metav1.NewTime(clockNow(r.Clock))
	cb.Attempts++
	cb.LastAttemptAt = &now
	if err == nil {
		cb.State = listsv1.CallbackDelivered
		cb.LastError = ""
		cb.DeliveredStatus = string(phase)
		managerMetrics().CallbackAttempt(metrics.CallbackDelivered)
		emit(r.Recorder, list, corev1.EventTypeNormal, "CallbackDelivered", "callback delivered (status %s)", phase)
		return ctrl.Result{}, nil
	}
	cb.LastError = err.Error()
	// The URL is user data and may carry tokens: log the error only.
	logf.FromContext(ctx).V(1).Info("callback attempt failed", "attempt", cb.Attempts, logging.KeyError, err.Error())
	if callback.IsPermanent(err) || r.Callbacks.Backoff.Exhausted(int(cb.Attempts)) {
		cb.State = listsv1.CallbackFailed
		managerMetrics().CallbackAttempt(metrics.CallbackFailed)
		emit(r.Recorder, list, corev1.EventTypeWarning, "CallbackFailed", "callback failed after %d attempts: %s", cb.Attempts, err.Error())
		return ctrl.Result{}, nil
	}
	managerMetrics().CallbackAttempt(metrics.CallbackRetrying)
	return ctrl.Result{RequeueAfter: r.Callbacks.Backoff.Delay(int(cb.Attempts))}, nil
}
