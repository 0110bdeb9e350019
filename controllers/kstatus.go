package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// The kstatus condition trio shared by every resource here: Argo CD and
// Flux read Reconciling=True as in progress, Stalled=True as failed, and
// Ready=True without either as current.

// markProgressing: work is under way.
func markProgressing(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: listsv1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(conds, metav1.Condition{Type: listsv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.RemoveStatusCondition(conds, listsv1.ConditionStalled)
}

// markReady: done and healthy.
func markReady(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: listsv1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.RemoveStatusCondition(conds, listsv1.ConditionReconciling)
	meta.RemoveStatusCondition(conds, listsv1.ConditionStalled)
}

// markStalled: failed for good; retrying will not help.
func markStalled(conds *[]metav1.Condition, gen int64, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: listsv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(conds, metav1.Condition{Type: listsv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.RemoveStatusCondition(conds, listsv1.ConditionReconciling)
}
