package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
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
	// SigningNamespace and SigningSecret name the Secret holding the
	// installation's signing key (installsecret.CallbackSigning), from which
	// the key of each tenant of the REST API is derived
	// (callback.TenantKey). It is read by name when a callback is sent.
	SigningNamespace, SigningSecret string
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
	now := metav1.NewTime(clockNow(r.Clock))
	sig, err := r.callbackSigning(actx, list, phase, now.Time)
	if err == nil {
		err = callback.DeliverSigned(actx, r.Callbacks.Client, list.Spec.CallbackURL, callback.Payload{
			ListID: list.Status.ListID, Status: string(phase), Name: list.Spec.Format.Name,
		}, sig)
	}
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

// callbackSigning returns how the list's callback is signed: a list the
// REST API created with its tenant's key (derived from the installation's
// signing key), a list naming spec.callbackSecretRef with that Secret's
// key, any other list not at all. The webhook-id is the same on every
// attempt of one announcement (the list's UID and phase). A key that cannot
// be read fails the attempt: a tenant's callback is never sent unsigned.
func (r *EmailListReconciler) callbackSigning(ctx context.Context, list *listsv1.EmailList, phase listsv1.Phase, now time.Time) (callback.Signing, error) {
	s := callback.Signing{ID: fmt.Sprintf("msg_%s_%s", list.UID, phase), Time: now}
	tenant := list.Labels[listsv1.LabelTenant]
	var err error
	switch {
	case list.Namespace == r.Access.APINamespace && list.Labels[listsv1.LabelManagedBy] == listsv1.ManagedByAPI && tenant != "":
		var inst []byte
		inst, err = r.secretValue(ctx, r.Callbacks.SigningNamespace, r.Callbacks.SigningSecret, installsecret.Field)
		if err == nil {
			if inst, err = callback.InstallationKey(map[string][]byte{installsecret.Field: inst}); err == nil {
				s.Key = callback.TenantKey(inst, tenant)
			}
		}
	case list.Spec.CallbackSecretRef != nil:
		var text []byte
		text, err = r.secretValue(ctx, list.Namespace, list.Spec.CallbackSecretRef.Name, callback.SecretKeyField)
		if err == nil {
			s.Key, err = callback.ParseSecret(string(text))
		}
	default:
		return s, nil // unsigned: nobody gave the list a key
	}
	if err != nil {
		return s, fmt.Errorf("callback signing key: %w", err)
	}
	return s, nil
}

// secretValue reads field of Secret ns/name, uncached (a get by name).
// Errors name the Secret and the field, never a value.
func (r *EmailListReconciler) secretValue(ctx context.Context, ns, name, field string) ([]byte, error) {
	if name == "" {
		return nil, errors.New("no signing Secret is configured (--" + installsecret.CallbackSigning.Flag() + ")")
	}
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("Secret %s/%s does not exist", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
	}
	v, ok := sec.Data[field]
	if !ok || len(v) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no %q", ns, name, field)
	}
	return v, nil
}
