package operator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// SecretState is what EnsureInstallationSecrets found or did for one
// installation secret.
type SecretState struct {
	Kind installsecret.Kind
	Name string
	// Created: it was missing and this call made it.
	Created bool
	// Missing: it is still missing (an external one not provided yet).
	Missing bool
	// Unusable says why an existing one holds no usable key ("" if it does).
	Unusable string
}

// EnsureInstallationSecrets makes, in namespace ns, each installation
// secret that is missing and that cfg does not name as external, with a
// new random key read from random (crypto/rand.Reader when nil). It only
// ever creates: a Secret that exists is never changed, whatever it holds,
// because what was made with its key (public list IDs, tenants' callback
// keys) would no longer match. It reads by name (c should be an uncached
// reader: the manager caches no Secret) and creates in ns only, the two
// grants the manager's Role holds on Secrets there.
func EnsureInstallationSecrets(ctx context.Context, r client.Reader, w client.Writer, ns string, cfg installsecret.Config, random io.Reader) ([]SecretState, error) {
	if random == nil {
		random = rand.Reader
	}
	var out []SecretState
	var errs []error
	for _, spec := range installsecret.Specs() {
		st, err := ensureOne(ctx, r, w, ns, spec, cfg, random)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}

func ensureOne(ctx context.Context, r client.Reader, w client.Writer, ns string, spec installsecret.Spec, cfg installsecret.Config, random io.Reader) (SecretState, error) {
	st := SecretState{Kind: spec.Kind, Name: cfg.Name(spec.Kind)}
	key := client.ObjectKey{Namespace: ns, Name: st.Name}
	var sec corev1.Secret
	err := r.Get(ctx, key, &sec)
	switch {
	case err == nil:
		if _, err := spec.Key(sec.Data); err != nil {
			st.Unusable = err.Error()
		}
		return st, nil
	case !apierrors.IsNotFound(err):
		return st, fmt.Errorf("read installation secret %s: %w", key, err)
	case !cfg.Creates(spec.Kind):
		st.Missing = true
		return st, nil
	}
	data, err := spec.Make(random)
	if err != nil {
		return st, err
	}
	sec = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Name, Labels: spec.Labels()},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptrTo(true),
		Data:       data,
	}
	switch err := w.Create(ctx, &sec); {
	case apierrors.IsAlreadyExists(err):
		// Another manager made it between the read and the create: keep
		// theirs (it is the one whose key may already be in use).
		return st, nil
	case err != nil:
		return st, fmt.Errorf("create installation secret %s: %w", key, err)
	}
	st.Created = true
	return st, nil
}

func ptrTo[T any](v T) *T { return &v }

// installationSecrets is the elected manager's start-up step: make the
// missing installation secrets, then, while an external one is missing or
// a read fails, look again every interval, saying in the log what is
// missing and what waits for it. It returns once all are in place.
type installationSecrets struct {
	reader    client.Reader
	writer    client.Writer
	namespace string
	cfg       installsecret.Config
	interval  time.Duration
}

// NeedLeaderElection: only the elected manager creates them, so replicas
// of one installation do not race to (each create is atomic anyway, and
// the loser keeps the winner's key).
func (s *installationSecrets) NeedLeaderElection() bool { return true }

func (s *installationSecrets) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("installation-secrets")
	for {
		states, err := EnsureInstallationSecrets(ctx, s.reader, s.writer, s.namespace, s.cfg, nil)
		waiting := err != nil
		for _, st := range states {
			switch {
			case st.Created:
				log.Info("created installation secret", "kind", st.Kind, "namespace", s.namespace, "secret", st.Name)
			case st.Missing:
				waiting = true
				log.Info("waiting for the installer's secret: until it exists, what needs it fails and is retried",
					"kind", st.Kind, "namespace", s.namespace, "secret", st.Name)
			case st.Unusable != "":
				// Never replaced: say so and leave it to the installer.
				log.Error(errors.New(st.Unusable), "installation secret holds no usable key; it is not replaced: fix or delete it",
					"namespace", s.namespace, "secret", st.Name)
			}
		}
		if err != nil {
			log.Error(err, "installation secrets")
		}
		if !waiting {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.interval):
		}
	}
}
