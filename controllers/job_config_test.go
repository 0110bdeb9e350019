package controllers

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// With a worker configuration, a list's Job gets it by reference: a
// content-named ConfigMap mounted in the pod, at most four arguments, and
// its per-list values (seats, its part of each host's budget) in the
// environment. The ConfigMap is the list's Job's (owned by it, so that
// Kubernetes deletes it with the Job); a list started later with another
// configuration gets another ConfigMap while the first stays, and a list
// started again after the operator's configuration changed keeps its own.
func TestJobsReadConfigurationByReference(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kubescheme.New()).Build()
	conf := []byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n")
	e := &JobExecutor{Client: c, Config: JobConfig{Namespace: "workers", Image: "worker:1", Parallelism: 8,
		SMTPBudget: SMTPBudget{Conns: 2, Rate: 5}, WorkerConfig: conf, FleetRequired: true}}
	a := budgetList("a", listsv1.ServiceEmailValidation)
	if err := e.Start(ctx, a, 12); err != nil {
		t.Fatal(err)
	}
	pod := jobOf(t, c, a).Spec.Template.Spec
	ctr := pod.Containers[0]
	if len(ctr.Args) > 4 || !slices.Contains(ctr.Args, "--config="+WorkerConfigDir+"/"+WorkerConfigFile) {
		t.Errorf("args %q: want at most 4, --config among them", ctr.Args)
	}
	env := map[string]string{}
	for _, v := range ctr.Env {
		env[v.Name] = v.Value
	}
	for k, want := range map[string]string{EnvFleetSeats: "12", EnvSMTPConns: "1", EnvSMTPRate: "2.5", EnvFleetRequired: "true"} {
		if env[k] != want {
			t.Errorf("$%s = %q, want %q", k, env[k], want)
		}
	}
	name := WorkerConfigMapName(JobName(a), conf)
	if len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != name {
		t.Fatalf("volumes %+v: want the ConfigMap %s", pod.Volumes, name)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "workers", Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[WorkerConfigFile] != string(conf) || cm.Immutable == nil || !*cm.Immutable {
		t.Errorf("ConfigMap %+v", cm)
	}
	job := jobOf(t, c, a)
	if o := cm.OwnerReferences; len(o) != 1 || o[0].Kind != "Job" || o[0].APIVersion != "batch/v1" || o[0].Name != job.Name || o[0].UID != job.UID {
		t.Errorf("owners %+v, want the Job %s (%s)", o, job.Name, job.UID)
	}

	// The operator's configuration changes: a new list gets a new name.
	e.Config.WorkerConfig = append(append([]byte(nil), conf...), "logging:\n  level: debug\n"...)
	b := budgetList("b", listsv1.ServiceEmailAppend)
	if err := e.Start(ctx, b, 1); err != nil {
		t.Fatal(err)
	}
	if got := jobOf(t, c, b).Spec.Template.Spec.Volumes[0].ConfigMap.Name; got == name {
		t.Error("a changed configuration kept the ConfigMap's name")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "workers", Name: name}, &cm); err != nil {
		t.Errorf("the first list's ConfigMap: %v", err)
	}
	// The first list started again (a manager restart) under the changed
	// configuration: its Job keeps its ConfigMap, and no other is made.
	if err := e.Start(ctx, a, 12); err != nil {
		t.Fatal(err)
	}
	if got := mountedConfigMap(&jobOf(t, c, a).Spec.Template.Spec); got != name {
		t.Errorf("restarted list mounts %s, want %s", got, name)
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace("workers")); err != nil || len(cms.Items) != 2 {
		t.Errorf("%d ConfigMaps (%v), want one per list", len(cms.Items), err)
	}
}

// A ConfigMap lost between its Job's create and its own (a manager
// stopped there) is made again when the list is started again under the
// same configuration.
func TestJobConfigMapRecreated(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kubescheme.New()).Build()
	conf := []byte("apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n")
	e := &JobExecutor{Client: c, Config: JobConfig{Namespace: "workers", Image: "worker:1", WorkerConfig: conf}}
	for _, svc := range []listsv1.Service{listsv1.ServiceEmailValidation, listsv1.ServiceEmailAppend} {
		l := budgetList("l-"+string(svc), svc)
		if err := e.Start(ctx, l, 2); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKey{Namespace: "workers", Name: WorkerConfigMapName(JobName(l), conf)}
		if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx, l, 2); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
			t.Errorf("%s: ConfigMap not made again: %v", svc, err)
		}
	}
}
