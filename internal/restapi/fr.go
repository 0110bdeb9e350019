package restapi

import (
	"context"
	"net/http"
	"net/url"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
)

// frDefaultBudget bounds the email check inside GET /fr.
var frDefaultBudget = cfgv1.Default().Fraud.EmailBudget.Duration

// fraudCheck serves GET /fr: an explainable risk assessment for the key's
// tenant. Bad optional inputs never fail the call; they are signals in
// reasons.
func (s *Server) fraudCheck(w http.ResponseWriter, r *http.Request, k *apikey.Key, q url.Values) {
	in := fraud.Input{
		Email: q.Get("email"), ReferenceID: q.Get("reference_id"),
		First: q.Get("first"), Last: q.Get("last"),
		Street: q.Get("street"), City: q.Get("city"), State: q.Get("state"), Zip: q.Get("zip"), Country: q.Get("country"),
		Phone: q.Get("phone"), IP: q.Get("ip"), UserAgent: q.Get("user_agent"),
	}
	budget := s.cfg.FraudBudget
	if budget <= 0 {
		budget = frDefaultBudget
	}
	vctx, cancel := context.WithTimeout(r.Context(), budget)
	ev := s.verifier.Verify(vctx, in.Email, verify.Options{SMTP: s.cfg.FraudSMTP, Tenant: historyTenant(k)})
	cancel()
	// The key's tenant asks: its own history and reports, and the network's
	// agreed reports, never another single tenant's.
	writeJSON(w, http.StatusOK, s.cfg.Fraud.Assess(r.Context(), k.Tenant, in, ev))
}
