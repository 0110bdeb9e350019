package controllers

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/emaildata/emaildata/api/kubescheme"
)

// TestBlockedPodNoPodsAfter: a Job without any pod counts as blocked
// exactly noPodsAfter after its creation, by the clock the caller reads,
// not the wall clock.
func TestBlockedPodNoPodsAfter(t *testing.T) {
	created := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "workers", Name: "list-x",
		UID: "u1", CreationTimestamp: metav1.NewTime(created)}}
	c := fake.NewClientBuilder().WithScheme(kubescheme.New()).Build()
	for _, tc := range []struct {
		age     time.Duration
		blocked bool
	}{
		{0, false},
		{noPodsAfter - time.Nanosecond, false},
		{noPodsAfter, true},
		{time.Hour, true},
	} {
		b, err := blockedPod(context.Background(), c, nil, job, created.Add(tc.age))
		if err != nil {
			t.Fatal(err)
		}
		if got := b != nil; got != tc.blocked {
			t.Errorf("age %v: blocked %v, want %v", tc.age, got, tc.blocked)
		}
		if b != nil && b.Reason != ReasonPodsNotCreated {
			t.Errorf("age %v: reason %q, want %q", tc.age, b.Reason, ReasonPodsNotCreated)
		}
	}
}
