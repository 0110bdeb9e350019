package verify

import "time"

// Result is the outcome of verifying one address. Each stage refines it;
// the syntax stage fills Address, Status, Code and the parsed parts.
type Result struct {
	Address     string   // echoed exactly as submitted
	Status      Status   // always Code.Status(); use SetCode to keep them in step
	Code        Code     // detailed status code
	DomainType  string   // "", "biz", "freeisp" or "disposable" (later stages)
	RoleAccount bool     // e.g. info@, sales@ (later stages)
	Corrections []string // suggested replacements (later stages)

	// Parsed parts for later stages. They are set when the address parsed
	// completely: codes CodeValidSyntax, CodeInvalidTLD and
	// CodeExtraCharacter (then they describe the cleaned-up address).
	Local         string // local part as written (without surrounding whitespace)
	Domain        string // domain in ASCII (punycode, lower-case) for DNS
	UnicodeDomain string // domain with U-labels, for display

	// FromHistory: the verdict came from the verification history
	// (checked at CheckedAt) rather than a probe now.
	FromHistory bool
	// CheckedAt is when the mailbox verdict was checked (zero without an
	// SMTP verdict).
	CheckedAt time.Time

	// typo marks a valid-looking address whose domain is a likely typo of a
	// well-known provider; the engine keeps its verdict invalid.
	typo bool
	// probed: the SMTP stage gave this verdict now; deferred: it was a
	// deferral (or may have been one), which the history does not keep.
	probed, deferred bool
}

// SetCode sets r.Code and the matching r.Status.
func (r *Result) SetCode(c Code) {
	r.Code = c
	r.Status = c.Status()
}

// SafeToSendResponse is the public JSON shape of a Result.
type SafeToSendResponse struct {
	Status           Status   `json:"status"`
	StatusCode       Code     `json:"status_code"`
	Address          string   `json:"address"`
	DomainType       string   `json:"domain_type,omitempty"`
	RoleAccount      bool     `json:"role_account,omitempty"`
	EmailCorrections []string `json:"email_corrections,omitempty"`
}

// SafeToSend returns the public JSON view of r. Parsed parts are internal
// and deliberately left out.
func (r Result) SafeToSend() SafeToSendResponse {
	return SafeToSendResponse{
		Status:           r.Status,
		StatusCode:       r.Code,
		Address:          r.Address,
		DomainType:       r.DomainType,
		RoleAccount:      r.RoleAccount,
		EmailCorrections: r.Corrections,
	}
}
