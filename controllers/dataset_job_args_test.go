package controllers

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// TestDatasetJobArgsHoldNoPassword: a Dataset's import Job names its
// stores in its arguments, but a URL with a password, which the worker
// then reads from the environment the Job's Secret gives it ($BLOB_URL,
// $PEOPLE_URL).
func TestDatasetJobArgsHoldNoPassword(t *testing.T) {
	ds := &listsv1.Dataset{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "people", UID: "uid-ds"}}
	for _, tc := range []struct {
		name, blob, people string
		want, absent       []string
	}{
		{"no password", "file:///store", "postgres://people@db/people", []string{"--blob-url", "file:///store", "--people-url", "postgres://people@db/people"}, nil},
		{"the people store's password", "file:///store", "postgres://people:s3cret@db/people", []string{"--blob-url", "file:///store"}, []string{"--people-url"}},
		{"the blob store's password", "s3://key:s3cret@bucket", "bolt:///people.db", []string{"--people-url", "bolt:///people.db"}, []string{"--blob-url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &DatasetJobLoader{Config: JobConfig{Namespace: "workers", Image: "worker:1", BlobURL: tc.blob, EnvFromSecret: "store"},
				PeopleURL: tc.people, Scheme: kubescheme.New()}
			j, err := l.buildJob(ds, "datasets/x")
			if err != nil {
				t.Fatal(err)
			}
			args := j.Spec.Template.Spec.Containers[0].Args
			if strings.Contains(strings.Join(args, " "), "s3cret") {
				t.Errorf("a password in the args %q", args)
			}
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("args %q lack %q", args, w)
				}
			}
			for _, a := range tc.absent {
				if slices.Contains(args, a) {
					t.Errorf("args %q hold %q", args, a)
				}
			}
		})
	}
}
