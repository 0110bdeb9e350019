package controllers

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// TestWorkerHistoryKeyRef: a list Job's pods take HISTORY_KEY from the
// installation secret the manager read, by reference to its name and the
// field holding the key ("key", or HISTORY_KEY in a Secret of before),
// required (the kubelet holds the pod until the Secret exists), never as
// a value or in the args; workers that open no history, and Dataset
// Jobs, get no reference at all.
func TestWorkerHistoryKeyRef(t *testing.T) {
	list := builders.MakeEmailList("team", "l").UID("uid-l").Obj()
	ds := &listsv1.Dataset{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "people", UID: "uid-ds"}}
	for _, tc := range []struct {
		name, secret, field string
		wantKey             string // "" for no reference
	}{
		{"no history", "", "", ""},
		{"made by the manager", "emaildata-history-key", "", installsecret.Field},
		{"kept from before", "emaildata-history-key", installsecret.LegacyHistoryField, "HISTORY_KEY"},
		{"brought", "vault-history", installsecret.Field, installsecret.Field},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := JobConfig{Namespace: "workers", Image: "worker:1", HistoryKeySecret: tc.secret, HistoryKeyField: tc.field,
				WorkerConfig: []byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\nverification:\n  history:\n    url: redis://r:6379/0\n")}
			lj, err := (&JobExecutor{Config: cfg}).buildJob(list, 2)
			if err != nil {
				t.Fatal(err)
			}
			dj, err := (&DatasetJobLoader{Config: cfg, Scheme: kubescheme.New()}).buildJob(ds, "datasets/x")
			if err != nil {
				t.Fatal(err)
			}
			if env := historyEnv(dj); env != nil {
				t.Errorf("Dataset Job: HISTORY_KEY %+v, want none", env)
			}
			env := historyEnv(lj)
			c := lj.Spec.Template.Spec.Containers[0]
			if strings.Contains(strings.Join(c.Args, " "), "HISTORY_KEY") || strings.Contains(strings.Join(c.Args, " "), "history-key") {
				t.Errorf("args %q name the key", c.Args)
			}
			if tc.wantKey == "" {
				if env != nil {
					t.Errorf("HISTORY_KEY %+v, want none", env)
				}
				return
			}
			if env == nil || env.Value != "" || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil {
				t.Fatalf("HISTORY_KEY %+v, want a secretKeyRef", env)
			}
			ref := env.ValueFrom.SecretKeyRef
			if ref.Name != tc.secret || ref.Key != tc.wantKey || ref.Optional == nil || *ref.Optional {
				t.Errorf("HISTORY_KEY from %s/%s optional %v, want %s/%s required", ref.Name, ref.Key, ref.Optional, tc.secret, tc.wantKey)
			}
		})
	}
}

// historyEnv is the HISTORY_KEY variable of a Job's worker container.
func historyEnv(j *batchv1.Job) *corev1.EnvVar {
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "HISTORY_KEY" {
			return &e
		}
	}
	return nil
}
