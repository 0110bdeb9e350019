package restapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

// DefaultSecretsRecheck is how often the API looks again for a missing
// installation secret it needs to start (RunOptions.SecretsRecheck).
const DefaultSecretsRecheck = 2 * time.Second

// LoadInstallationKeys gives vc and fc the keys of the installation
// secrets they need and were not given otherwise: the verification
// history's (vc.NeedsHistoryKeySecret) and the fraud history's
// (fc.NeedsKeySecret, with a fleet backend when vc names one). It reads
// them by name in o.KeyNamespace, as the list ID key is read, and never
// makes one: until the manager has made it (or the installer brought it)
// it waits, saying so every o.SecretsRecheck, so the first API pod of a
// fresh install starts once the manager is up. Reading by name, rather
// than a secretKeyRef in the pod spec, keeps the key out of the pod's
// environment and lets this read the field a Secret of before holds,
// under a grant the API has already (get on the installation secrets'
// names). Keys are never logged.
func LoadInstallationKeys(ctx context.Context, cfg *rest.Config, o RunOptions, vc *wiring.VerifyConfig, fc *wiring.FraudConfig) error {
	o.defaults()
	var kinds []installsecret.Kind
	if vc != nil && vc.NeedsHistoryKeySecret() {
		kinds = append(kinds, installsecret.HistoryKey)
	}
	if fc != nil && fc.NeedsKeySecret(vc != nil && vc.Fleet.URL != "") {
		kinds = append(kinds, installsecret.FraudHistoryKey)
	}
	if len(kinds) == 0 {
		return nil
	}
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		return fmt.Errorf("create the client reading the installation secrets: %w", err)
	}
	fetch := secretFetch(c, o.KeyNamespace)
	for _, k := range kinds {
		l, err := o.Secrets.Await(ctx, k, fetch, o.SecretsRecheck, func(name string, why error) {
			msg := "waiting for an installation secret the manager makes: the API starts once it can read it"
			if !errors.Is(why, installsecret.ErrMissing) {
				msg = "cannot read an installation secret yet; trying again"
			}
			o.Log.Info(msg, "kind", string(k), "namespace", o.KeyNamespace, "secret", name, logging.KeyError, why.Error())
		})
		if err != nil {
			return err
		}
		switch k {
		case installsecret.HistoryKey:
			vc.HistoryKey = l.Key
		case installsecret.FraudHistoryKey:
			fc.HistoryKey = string(l.Key)
		}
		o.Log.Info("installation secret read", "kind", string(k), "namespace", o.KeyNamespace, "secret", l.Name, "field", l.Field)
	}
	return nil
}

// secretFetch reads installation secrets by name in namespace ns through
// r (a get: the API's and the manager's RBAC grant no more on them).
func secretFetch(r client.Reader, ns string) installsecret.Fetch {
	return func(ctx context.Context, name string) (map[string][]byte, bool, error) {
		var sec corev1.Secret
		switch err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sec); {
		case apierrors.IsNotFound(err):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		return sec.Data, true, nil
	}
}
