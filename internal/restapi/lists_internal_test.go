package restapi

import (
	"testing"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// TestStatusWords: the list status follows the phase; Processing while the
// service runs.
func TestStatusWords(t *testing.T) {
	for phase, want := range map[listsv1.Phase][2]string{
		"":                      {"Pending", "Pending"},
		listsv1.PhasePending:    {"Pending", "Pending"},
		listsv1.PhaseProcessing: {"Processing", "Processing"},
		listsv1.PhaseProcessed:  {"Processed", "Completed"},
		listsv1.PhaseResults:    {"Results", "Completed"},
		listsv1.PhaseFailed:     {"Failed", "Error"},
	} {
		l := &listsv1.EmailList{Spec: listsv1.EmailListSpec{Service: listsv1.ServiceEmailValidation}, Status: listsv1.EmailListStatus{Phase: phase, SizeBytes: 42}}
		b := statusBody(l)
		if b.Status != want[0] || b.Services["email_validation"].Status != want[1] || b.SizeBytes != 42 {
			t.Errorf("%q: status %q service %q size %d, want %v", phase, b.Status, b.Services["email_validation"].Status, b.SizeBytes, want)
		}
	}
}
