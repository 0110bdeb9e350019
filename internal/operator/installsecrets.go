package operator

import (
	"context"
	"crypto/hmac"
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

// historyKey gives the verification history's key to this manager's
// engine and its worker Jobs, when they open a history
// (Verify.NamesHistory). Its home is the installation secret HistoryKey,
// read by name, never from the environment at pod start: a manager whose
// pod waited for a Secret that it makes itself once running would never
// start.
//
// The elected manager makes the installation secrets once it is running
// (installationSecrets); this one is needed before, while the engine is
// built, on every replica. So, unless the installer brings it
// (--external-secrets: then this waits for it), a missing one is made
// here, elected or not: a create is atomic, and a replica that loses the
// race reads the winner's key. A Secret holding no usable key is never
// replaced: the manager refuses to start and says why.
//
// Worker pods get it from the same Secret by a secretKeyRef, of the field
// that holds it ("key", or HISTORY_KEY in a Secret the chart or
// config/default made before). A manager given a key of its own
// (--history-key-file, $HISTORY_KEY: make run) keys its engine with that;
// for its workers it then only reads the Secret, and refuses to start
// when they would get another key.
func historyKey(ctx context.Context, r client.Reader, w client.Writer, o *Options) error {
	if !o.Verify.NamesHistory() {
		return nil
	}
	jobs := o.Executor == ExecutorJob
	given, from, err := o.Verify.GivenHistoryKey()
	if err != nil {
		return err
	}
	own := given != nil || o.Verify.History != nil
	if own && !jobs {
		return nil // keyed with what it was given; no pod needs the Secret
	}
	name := o.Secrets.Name(installsecret.HistoryKey)
	if jobs && o.Job.Namespace != o.Namespace {
		return fmt.Errorf("worker Jobs in namespace %s would open the verification history, whose key is the installation secret %s/%s: "+
			"a pod can take a Secret of its own namespace only; run the workers in %s (--worker-namespace), or without a history (--history-url=off)",
			o.Job.Namespace, o.Namespace, name, o.Namespace)
	}
	var l installsecret.Loaded
	if own {
		if l, err = ownHistoryKey(ctx, r, o, given, from); err != nil {
			return err
		}
	} else {
		if l, err = awaitHistoryKey(ctx, r, w, o); err != nil {
			return fmt.Errorf("the verification history's key: %w", err)
		}
		o.Verify.HistoryKey = l.Key
	}
	logf.FromContext(ctx).WithName("installation-secrets").Info("verification history key read", "namespace", o.Namespace, "secret", l.Name, "field", l.Field)
	if jobs {
		o.Job.HistoryKeySecret, o.Job.HistoryKeyField = l.Name, l.Field
	}
	return nil
}

// awaitHistoryKey makes the history key's Secret when it is missing (not
// one the installer brings), and reads it, waiting while it is missing.
func awaitHistoryKey(ctx context.Context, r client.Reader, w client.Writer, o *Options) (installsecret.Loaded, error) {
	log := logf.FromContext(ctx).WithName("installation-secrets")
	spec, _ := installsecret.Lookup(installsecret.HistoryKey)
	fetch := func(ctx context.Context, name string) (map[string][]byte, bool, error) {
		st, err := ensureOne(ctx, r, w, o.Namespace, spec, o.Secrets, rand.Reader)
		if err != nil {
			return nil, false, err
		}
		if st.Created {
			log.Info("created installation secret", "kind", st.Kind, "namespace", o.Namespace, "secret", st.Name)
		}
		return readSecret(ctx, r, o.Namespace, name)
	}
	return o.Secrets.Await(ctx, installsecret.HistoryKey, fetch, o.SecretsRecheck, func(name string, why error) {
		log.Info("waiting for the verification history's key: the manager starts once it can read it",
			"namespace", o.Namespace, "secret", name, "reason", why.Error())
	})
}

// ownHistoryKey reads the history key's Secret, which the workers of a
// manager given its own key take theirs from: it must exist (it is not
// made here: it would hold another key) and hold the same key.
func ownHistoryKey(ctx context.Context, r client.Reader, o *Options, given []byte, from string) (installsecret.Loaded, error) {
	name := o.Secrets.Name(installsecret.HistoryKey)
	spec, _ := installsecret.Lookup(installsecret.HistoryKey)
	data, found, err := readSecret(ctx, r, o.Namespace, name)
	if err == nil && !found {
		err = installsecret.ErrMissing
	}
	var l installsecret.Loaded
	if err == nil {
		l = installsecret.Loaded{Kind: spec.Kind, Name: name}
		l.Field, l.Key, err = spec.Find(data)
	}
	switch {
	case err != nil:
		return l, fmt.Errorf("worker Jobs take the verification history's key from the installation secret %s/%s: %w; "+
			"make it hold the key this manager has from %s, or give the manager no key of its own (it then makes and reads that Secret)",
			o.Namespace, name, err, from)
	case given != nil && !hmac.Equal(given, l.Key):
		return l, fmt.Errorf("the installation secret %s/%s, which worker Jobs take the verification history's key from, holds another key "+
			"than %s: one address would be kept under two keys; give one key (put this one in the Secret, or drop %s)", o.Namespace, name, from, from)
	}
	return l, nil
}

// readSecret reads a Secret's data by name (found false: it does not exist).
func readSecret(ctx context.Context, r client.Reader, ns, name string) (map[string][]byte, bool, error) {
	var sec corev1.Secret
	switch err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sec); {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return sec.Data, true, nil
}
