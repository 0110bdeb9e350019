package restapi

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/logging"
)

// callbackSecretBody is the GET /v5/callback/secret response.
type callbackSecretBody struct {
	// Secret is the tenant's signing key in its text form (whsec_...).
	Secret string `json:"secret"`
	// Scheme names how callbacks are signed.
	Scheme string `json:"scheme"`
}

// callbackScheme is callbackSecretBody.Scheme.
const callbackScheme = "standard-webhooks-v1"

// anyListService authorizes keys enabled for a list service: callbacks
// belong to lists.
func anyListService(w http.ResponseWriter, r *http.Request, k *apikey.Key) (string, bool) {
	if len(k.EnabledListServices()) == 0 {
		refuseHeaderJSON(w, r, refuseForbidden, "any list service", 0)
		return "", false
	}
	return "", true
}

// callbackSecret answers the key with which the callbacks of the caller's
// tenant's lists are signed: derived from the installation's signing key
// and the tenant (callback.TenantKey), as the manager derives it when it
// signs. Every key of the tenant gets the same answer, and no other
// tenant's. The installation key is read by name when asked, never cached.
func (s *Server) callbackSecret(w http.ResponseWriter, r *http.Request) {
	k := keyFrom(r.Context())
	var sec corev1.Secret
	err := s.live.Get(r.Context(), client.ObjectKey{Namespace: s.cfg.CallbackSigningNamespace, Name: s.cfg.CallbackSigningSecret}, &sec)
	if apierrors.IsNotFound(err) {
		s.log.Warn("callback signing Secret is missing: callbacks of API lists fail until it exists",
			"namespace", s.cfg.CallbackSigningNamespace, "secret", s.cfg.CallbackSigningSecret)
		writeError(w, r, http.StatusServiceUnavailable, "CallbackSigningUnavailable",
			"callback signing is not configured on this server yet; callbacks of your lists are not sent until it is")
		return
	}
	if err != nil {
		s.internalError(w, r, "read the callback signing Secret", err)
		return
	}
	inst, err := callback.InstallationKey(sec.Data)
	if err != nil {
		s.log.Warn("callback signing Secret is unusable", "secret", s.cfg.CallbackSigningSecret, logging.KeyError, err.Error())
		writeError(w, r, http.StatusServiceUnavailable, "CallbackSigningUnavailable",
			"callback signing is not configured on this server yet; callbacks of your lists are not sent until it is")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, callbackSecretBody{
		Secret: callback.FormatSecret(callback.TenantKey(inst, tenantLabel(k.Tenant))),
		Scheme: callbackScheme,
	})
}
