package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// Every condition the helpers set is dated by the reconciler's clock, and a
// condition keeps its date while its status stays the same.
func TestConditionsDatedByTheClock(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	var conds []metav1.Condition
	at := func(d time.Duration) conditions {
		clk.SetTime(t0.Add(d))
		return conditionsOf(&conds, 3, clk)
	}
	want := func(step, typ string, status metav1.ConditionStatus, since time.Duration) {
		t.Helper()
		for _, c := range conds {
			if c.Type != typ {
				continue
			}
			if c.Status != status || !c.LastTransitionTime.Time.Equal(t0.Add(since)) || c.ObservedGeneration != 3 {
				t.Errorf("%s: %s=%s since %s (generation %d), want %s since %s", step, typ, c.Status,
					c.LastTransitionTime.Time, c.ObservedGeneration, status, t0.Add(since))
			}
			return
		}
		t.Errorf("%s: no %s condition in %v", step, typ, conds)
	}
	at(0).progressing("Preparing", "queued")
	want("progressing", listsv1.ConditionReconciling, metav1.ConditionTrue, 0)
	want("progressing", listsv1.ConditionReady, metav1.ConditionFalse, 0)

	at(10*time.Second).progressing("Processing", "running")
	want("still progressing", listsv1.ConditionReconciling, metav1.ConditionTrue, 0)

	at(25*time.Second).stalled("PodStartFailed", "did not start")
	want("stalled", listsv1.ConditionStalled, metav1.ConditionTrue, 25*time.Second)
	want("stalled", listsv1.ConditionReady, metav1.ConditionFalse, 0)

	at(40*time.Second).ready("Processed", "done")
	want("ready", listsv1.ConditionReady, metav1.ConditionTrue, 40*time.Second)
	if len(conds) != 1 {
		t.Errorf("ready leaves %d conditions, want Ready alone: %v", len(conds), conds)
	}
}
