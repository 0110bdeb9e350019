package restapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// purchaseRequest is the optional purchase body.
type purchaseRequest struct {
	Fields  []string `json:"fields,omitempty"`
	Options struct {
		EmailAppend struct {
			MatchType string `json:"match_type,omitempty"`
		} `json:"email_append"`
	} `json:"options"`
}

// purchaseResponse is the JSON purchase answer; text/plain callers get the
// status word alone.
type purchaseResponse struct {
	ListID    int64          `json:"list_id"`
	Status    string         `json:"status"`
	Delivered *deliveredBody `json:"delivered,omitempty"`
}

// purchase creates the list's Purchase (named after the list, so repeating
// the call is idempotent) and answers once the list is Results. The body
// is checked whole, against the columns the list's service delivers,
// before anything is written.
func (s *Server) purchase(w http.ResponseWriter, r *http.Request, l *listsv1.EmailList) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if isSlowBody(err) {
		writeError(w, r, http.StatusRequestTimeout, "SlowUpload", slowBodyMessage(err))
		return
	}
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "BadRequest", "could not read the request body")
		return
	}
	req, msg := decodePurchase(body)
	if msg == "" {
		msg = checkPurchaseShape(req)
	}
	if msg != "" {
		writeError(w, r, http.StatusBadRequest, "BadRequest", msg)
		return
	}
	if !services.Purchasable(string(l.Spec.Service)) {
		writeError(w, r, http.StatusBadRequest, "NotPurchasable", fmt.Sprintf("%s lists always run with action=process and are purchased when processed; there is nothing to purchase", l.Spec.Service))
		return
	}
	columns, err := s.listColumns(r.Context(), l)
	if err != nil {
		s.internalError(w, r, "read list plan", err)
		return
	}
	if columns != nil {
		if err := pipeline.CheckDelivery(columns, req.delivery()); err != nil {
			writeError(w, r, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
	}

	switch {
	case l.Status.Phase == listsv1.PhaseFailed:
		writeError(w, r, http.StatusConflict, "ListFailed", "the list failed and has no results to purchase")
		return
	case l.Status.Phase == listsv1.PhaseResults:
		s.answerPurchased(w, r, l, req, columns)
		return
	case l.Status.Phase != listsv1.PhaseProcessed:
		writeError(w, r, http.StatusConflict, "NotProcessed", "the list is not processed yet; purchase it once its status is Processed")
		return
	}

	p := &listsv1.Purchase{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name + "-purchase", Labels: map[string]string{TenantLabel: l.Labels[TenantLabel]}},
		Spec:       listsv1.PurchaseSpec{ListName: l.Name, Fields: req.Fields, MatchType: req.Options.EmailAppend.MatchType},
	}
	if err := s.client.Create(r.Context(), p); apierrors.IsAlreadyExists(err) {
		var cur listsv1.Purchase
		if err := s.client.Get(r.Context(), client.ObjectKeyFromObject(p), &cur); err == nil &&
			!listsv1.SameDelivery(&listsv1.DeliveryStatus{Fields: cur.Spec.Fields, MatchType: cur.Spec.MatchType}, req.Fields, req.Options.EmailAppend.MatchType, columns) {
			writeError(w, r, http.StatusConflict, "PurchaseDiffers", fmt.Sprintf("a purchase of this list with fields [%s] and match type %q is already being applied",
				strings.Join(cur.Spec.Fields, ", "), cur.Spec.MatchType))
			return
		}
	} else if err != nil {
		s.internalError(w, r, "create purchase", err)
		return
	}
	settled, err := s.waitResults(r.Context(), l)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.internalError(w, r, "wait for purchase", err)
		return
	}
	if settled == nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, r, http.StatusAccepted, "PurchasePending", "the purchase is recorded and still being applied; check the list status")
		return
	}
	s.answerPurchased(w, r, settled, req, columns)
}

// checkPurchaseShape checks what needs no list: the count of fields and the
// match type.
func checkPurchaseShape(req purchaseRequest) string {
	if len(req.Fields) > listsv1.MaxPurchaseFields {
		return fmt.Sprintf("at most %d fields may be selected", listsv1.MaxPurchaseFields)
	}
	switch mt := req.Options.EmailAppend.MatchType; mt {
	case "", listsv1.MatchIndividual, listsv1.MatchHousehold:
		return ""
	default:
		return fmt.Sprintf("options.email_append.match_type %q must be %s or %s", truncate(mt, 10), listsv1.MatchIndividual, listsv1.MatchHousehold)
	}
}

// answerPurchased answers for a list in Results: 200 with what was
// delivered when req asks for that (repeating a purchase is idempotent),
// else 409 saying what the list delivered.
func (s *Server) answerPurchased(w http.ResponseWriter, r *http.Request, l *listsv1.EmailList, req purchaseRequest, columns []string) {
	d := delivered(l, columns)
	if !sameAsDelivered(l, req, columns) {
		writeError(w, r, http.StatusConflict, "AlreadyPurchased", fmt.Sprintf("the list was already purchased and delivered fields [%s]%s; a list is delivered once",
			strings.Join(d.Fields, ", "), matchTypeNote(d)))
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, purchaseResponse{ListID: l.Status.ListID, Status: string(listsv1.PhaseResults), Delivered: d})
		return
	}
	writeText(w, http.StatusOK, string(listsv1.PhaseResults))
}

func matchTypeNote(d *deliveredBody) string {
	if d.MatchType == "" {
		return ""
	}
	return " with match type " + d.MatchType
}

// waitResults polls the cache until the list is Results, up to PurchaseWait.
func (s *Server) waitResults(ctx context.Context, l *listsv1.EmailList) (*listsv1.EmailList, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PurchaseWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var cur listsv1.EmailList
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(l), &cur); err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, err
		}
		if cur.Status.Phase == listsv1.PhaseResults {
			return &cur, nil
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, nil
			}
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// wantsJSON: the spec's purchase call sends accept: text/plain; JSON only
// when asked for it first.
func wantsJSON(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "application/json") && !strings.HasPrefix(strings.TrimSpace(a), "text/plain")
}
