package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// The kstatus condition trio shared by every resource here: Argo CD and
// Flux read Reconciling=True as in progress, Stalled=True as failed, and
// Ready=True without either as current.

// conditions sets one object's conditions, each transition dated by the
// reconciler's clock: meta.SetStatusCondition dates a condition that
// carries no time of its own by the wall clock, which a test's fake
// clock could not move.
type conditions struct {
	list *[]metav1.Condition
	gen  int64
	now  time.Time
}

// conditionsOf reads the clock once for every condition set through it.
func conditionsOf(list *[]metav1.Condition, gen int64, c clock.PassiveClock) conditions {
	return conditions{list: list, gen: gen, now: clockNow(c)}
}

// set sets one condition; its time changes only when its status does.
func (c conditions) set(typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(c.list, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: c.gen, LastTransitionTime: metav1.NewTime(c.now)})
}

// progressing: work is under way.
func (c conditions) progressing(reason, msg string) {
	c.set(listsv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	c.set(listsv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	meta.RemoveStatusCondition(c.list, listsv1.ConditionStalled)
}

// ready: done and healthy.
func (c conditions) ready(reason, msg string) {
	c.set(listsv1.ConditionReady, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(c.list, listsv1.ConditionReconciling)
	meta.RemoveStatusCondition(c.list, listsv1.ConditionStalled)
}

// stalled: failed for good; retrying will not help.
func (c conditions) stalled(reason, msg string) {
	c.set(listsv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	c.set(listsv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	meta.RemoveStatusCondition(c.list, listsv1.ConditionReconciling)
}
