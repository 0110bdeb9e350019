package restapi

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/refdata/phone"
)

// GET /pv: phone verification. The number is parsed, validated and
// classified with libphonenumber's metadata (internal/refdata/phone): line type,
// region, calling code, and the carrier where the library's carrier data
// has the number's prefix. status is valid or invalid from that, or live
// or disconnected where the phone status reference data (a Dataset,
// people.PhoneStore) holds the number, which alone gives prepaid and
// connected_score. Nothing is guessed: what no source holds is omitted.

// phoneVerification is the body's phone_verification object.
type phoneVerification struct {
	// PhoneNumber is the number in E.164 without "+" (the input's digits
	// for an invalid number).
	PhoneNumber        string `json:"phone_number"`
	LineType           string `json:"line_type,omitempty"`
	Carrier            string `json:"carrier,omitempty"`
	Status             string `json:"status"`
	Prepaid            *bool  `json:"prepaid,omitempty"`
	ConnectedScore     *int   `json:"connected_score,omitempty"`
	CountryCode        string `json:"country_code,omitempty"`
	CountryCallingCode int    `json:"country_calling_code,omitempty"`
}

type phoneAnswer struct {
	PhoneVerification phoneVerification `json:"phone_verification"`
}

// Statuses of GET /pv beyond people.PhoneLive and people.PhoneDisconnected.
const (
	phoneValid   = "valid"
	phoneInvalid = "invalid"
)

func hasPhone(q url.Values) bool { return q.Get("phone") != "" }

// verifyPhone serves GET /pv.
func (s *Server) verifyPhone(w http.ResponseWriter, r *http.Request, _ *apikey.Key, q url.Values) {
	region := ""
	if c := q.Get("country"); c != "" {
		var ok bool
		if region, ok = phone.Region(c); !ok {
			invalidParam(w, "country")
			return
		}
	}
	n, err := phone.Parse(q.Get("phone"), region)
	if errors.Is(err, phone.ErrMalformed) {
		invalidParam(w, "phone")
		return
	}
	if !n.Valid {
		writeJSON(w, http.StatusOK, phoneAnswer{phoneVerification{PhoneNumber: n.Digits, Status: phoneInvalid}})
		return
	}
	v := phoneVerification{
		PhoneNumber: n.E164Digits(), LineType: n.LineType, Carrier: n.Carrier, Status: phoneValid,
		CountryCode: n.Region, CountryCallingCode: n.CallingCode,
	}
	if ps, ok := s.cfg.People.(people.PhoneStore); ok {
		ref, err := ps.LookupPhone(r.Context(), n.E164)
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			s.internalError(w, r, "phone verification", err)
			return
		}
		if ref != nil {
			if ref.Status != "" {
				v.Status = ref.Status
			}
			v.Prepaid = ref.Prepaid
			if n.Region == "US" { // the score is defined for US numbers only
				v.ConnectedScore = ref.ConnectedScore
			}
		}
	}
	writeJSON(w, http.StatusOK, phoneAnswer{v})
}
