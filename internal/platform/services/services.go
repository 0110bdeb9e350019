// Package services names the data services, once, for every package that
// speaks of them: API keys enable them, lists run them, the service registry
// registers them, the CRD's Service type takes their values. It imports
// nothing, so a domain engine can import it without pulling in the API types.
package services

// Service names.
const (
	// EmailValidation verifies addresses (lists and GET /v5/ev).
	EmailValidation = "email_validation"
	// EmailAppend finds email addresses for name and postal records.
	EmailAppend = "email_append"
	// EmailIntelligence appends demographics to email addresses.
	EmailIntelligence = "email_intelligence"
	// Fraud scores a transaction (GET /fr).
	Fraud = "fraud"
	// Demographics looks up one person (GET /v5/td, bulk demographics).
	Demographics = "demographics"
)

// Known lists every service name an API key may enable.
var Known = []string{EmailValidation, EmailAppend, EmailIntelligence, Fraud, Demographics}

// List are the services that run over lists.
var List = []string{EmailValidation, EmailAppend, EmailIntelligence}

// Purchasable reports whether a list service's results can be held until
// a Purchase buys them (action=report). email_validation's cannot: its
// lists always run with action=process and are purchased on completion.
// The REST API's submit and purchase and the Purchase controller ask here;
// the EmailList CRD's CEL rule says the same, and a test of the API types
// evaluates that rule against this function.
func Purchasable(service string) bool {
	for _, s := range List {
		if s == service {
			return service != EmailValidation
		}
	}
	return false
}
