package fraud

// Reason codes. Each names one signal; its points come from the weights of
// the configuration (Config.Weights), so a code with weight 0 is disabled and
// never reported. Descriptions never contain submitted values.
const (
	// Email validity (from the verify.Result given to Assess).
	ReasonEmailInvalid       = "email_invalid"
	ReasonEmailDomainInvalid = "email_domain_invalid"
	ReasonEmailDangerous     = "email_dangerous"
	ReasonEmailTrap          = "email_trap"
	ReasonEmailDisposable    = "email_disposable"
	ReasonEmailTypo          = "email_typo"
	ReasonEmailRole          = "email_role"
	ReasonEmailFree          = "email_free"
	ReasonEmailCorporate     = "email_corporate"
	ReasonEmailDeliverable   = "email_deliverable"
	ReasonEmailCatchAll      = "email_catch_all"
	ReasonEmailUnverified    = "email_unverified"

	// Local-part patterns.
	ReasonEmailRandom    = "email_random"
	ReasonEmailDigits    = "email_digits"
	ReasonEmailPlusTag   = "email_plus_tag"
	ReasonEmailNameMatch = "email_name_match"

	// History.
	ReasonEmailTumbling = "email_tumbling"
	ReasonEmailVelocity = "email_velocity"
	// ReasonEmailVelocityNetwork: other tenants asked about the address
	// recently, enough of them (NetworkConfig).
	ReasonEmailVelocityNetwork = "email_velocity_network"
	ReasonEmailNew             = "email_new"
	ReasonEmailEstablished     = "email_established"
	ReasonDomainNew            = "domain_new"
	ReasonIPVelocity           = "ip_velocity"
	ReasonPhoneVelocity        = "phone_velocity"

	// Feedback (POST /feedback/v1): the asking tenant's own reports, and
	// other tenants' reports once enough of them agree (the network).
	ReasonEmailReported        = "email_reported"
	ReasonIPReported           = "ip_reported"
	ReasonPhoneReported        = "phone_reported"
	ReasonEmailReportedNetwork = "email_reported_network"
	ReasonIPReportedNetwork    = "ip_reported_network"
	ReasonPhoneReportedNetwork = "phone_reported_network"

	// IP address.
	ReasonIPInvalid         = "ip_invalid"
	ReasonIPPrivate         = "ip_private"
	ReasonIPTor             = "ip_tor"
	ReasonIPVPN             = "ip_vpn"
	ReasonIPProxy           = "ip_proxy"
	ReasonIPHosting         = "ip_hosting"
	ReasonIPCountryMismatch = "ip_country_mismatch"

	// Phone.
	ReasonPhoneMalformed       = "phone_malformed"
	ReasonPhoneInvalid         = "phone_invalid"
	ReasonPhoneVOIP            = "phone_voip"
	ReasonPhonePremium         = "phone_premium_rate"
	ReasonPhoneTollFree        = "phone_toll_free"
	ReasonPhonePager           = "phone_pager"
	ReasonPhoneMobile          = "phone_mobile"
	ReasonPhoneLandline        = "phone_landline"
	ReasonPhoneCountryMismatch = "phone_country_mismatch"
	ReasonIPPhoneCountry       = "ip_phone_country_mismatch"

	// Postal.
	ReasonCountryUnknown   = "country_unknown"
	ReasonZipInvalid       = "zip_invalid"
	ReasonZipStateMismatch = "zip_state_mismatch"
	ReasonStateUnknown     = "state_unknown"
	ReasonFirstNameMatch   = "first_name_match"
	ReasonFirstNameNoMatch = "first_name_no_match"
	ReasonLastNameMatch    = "last_name_match"
	ReasonLastNameNoMatch  = "last_name_no_match"
	ReasonStreetMatch      = "street_match"
	ReasonStreetNoMatch    = "street_no_match"
	ReasonCityMatch        = "city_match"
	ReasonCityNoMatch      = "city_no_match"
	ReasonZipMatch         = "zip_match"
	ReasonZipNoMatch       = "zip_no_match"

	// User agent.
	ReasonUAMissing    = "ua_missing"
	ReasonUAHeadless   = "ua_headless"
	ReasonUAAutomation = "ua_automation"
	ReasonUABot        = "ua_bot"
)

// reasonDescriptions are the fixed English descriptions of the codes. They
// are also the set of known codes: a weight for any other code is a
// configuration error.
var reasonDescriptions = map[string]string{
	ReasonEmailInvalid:       "email address is invalid",
	ReasonEmailDomainInvalid: "email domain does not exist or cannot receive mail",
	ReasonEmailDangerous:     "email mailbox name is not accepted (for example an abuse mailbox)",
	ReasonEmailTrap:          "email address is a known spam trap or high-risk address",
	ReasonEmailDisposable:    "email address uses a disposable mailbox provider",
	ReasonEmailTypo:          "email address looks mistyped; a correction is suggested",
	ReasonEmailRole:          "email address is a role mailbox, not a person",
	ReasonEmailFree:          "email address uses a free mailbox provider",
	ReasonEmailCorporate:     "email address uses a corporate domain",
	ReasonEmailDeliverable:   "email address is verified deliverable",
	ReasonEmailCatchAll:      "email domain accepts all mailboxes; the mailbox is unconfirmed",
	ReasonEmailUnverified:    "email address could not be verified in time",

	ReasonEmailRandom:    "email local part looks randomly generated",
	ReasonEmailDigits:    "email local part contains a long run of digits",
	ReasonEmailPlusTag:   "email local part carries a plus tag",
	ReasonEmailNameMatch: "first or last name appears in the email local part",

	ReasonEmailTumbling:        "variants of this email address were used recently (tumbling)",
	ReasonEmailVelocity:        "email address was submitted many times recently",
	ReasonEmailVelocityNetwork: "email address was submitted to several other clients recently (network)",
	ReasonEmailNew:             "email address has not been seen before",
	ReasonEmailEstablished:     "email address was first seen long ago",
	ReasonDomainNew:            "email domain has not been seen before",
	ReasonIPVelocity:           "many different email addresses came from this IP address recently",
	ReasonPhoneVelocity:        "many different email addresses used this phone number recently",

	ReasonEmailReported:        "email address was reported as fraud in your feedback",
	ReasonIPReported:           "IP address was reported in a fraud case in your feedback",
	ReasonPhoneReported:        "phone number was reported in a fraud case in your feedback",
	ReasonEmailReportedNetwork: "email address was reported as fraud by several other clients (network)",
	ReasonIPReportedNetwork:    "IP address was reported in fraud cases by several other clients (network)",
	ReasonPhoneReportedNetwork: "phone number was reported in fraud cases by several other clients (network)",

	ReasonIPInvalid:         "ip is not a valid IP address",
	ReasonIPPrivate:         "IP address is private, reserved or not routable",
	ReasonIPTor:             "IP address is a Tor exit node",
	ReasonIPVPN:             "IP address belongs to a VPN service",
	ReasonIPProxy:           "IP address is a known proxy",
	ReasonIPHosting:         "IP address belongs to a hosting provider or data centre",
	ReasonIPCountryMismatch: "IP address location does not match the given country",

	ReasonPhoneMalformed:       "phone is not a parseable phone number",
	ReasonPhoneInvalid:         "phone number is not valid for its country",
	ReasonPhoneVOIP:            "phone number is a VoIP number",
	ReasonPhonePremium:         "phone number is a premium-rate number",
	ReasonPhoneTollFree:        "phone number is a toll-free number",
	ReasonPhonePager:           "phone number is a pager number",
	ReasonPhoneMobile:          "phone number is a valid mobile number",
	ReasonPhoneLandline:        "phone number is a valid landline number",
	ReasonPhoneCountryMismatch: "phone number country does not match the given country",
	ReasonIPPhoneCountry:       "IP address location and phone number country differ",

	ReasonCountryUnknown:   "country is not a known ISO 3166 alpha-2 code",
	ReasonZipInvalid:       "postal code format is not valid for the country",
	ReasonZipStateMismatch: "postal code does not belong to the given state",
	ReasonStateUnknown:     "state is not a known US state code or name",
	ReasonFirstNameMatch:   "first name matches the reference record",
	ReasonFirstNameNoMatch: "first name does not match the reference record",
	ReasonLastNameMatch:    "last name matches the reference record",
	ReasonLastNameNoMatch:  "last name does not match the reference record",
	ReasonStreetMatch:      "street matches the reference record",
	ReasonStreetNoMatch:    "street does not match the reference record",
	ReasonCityMatch:        "city matches the reference record",
	ReasonCityNoMatch:      "city does not match the reference record",
	ReasonZipMatch:         "postal code matches the reference record",
	ReasonZipNoMatch:       "postal code does not match the reference record",

	ReasonUAMissing:    "no user agent was given",
	ReasonUAHeadless:   "user agent is a headless browser",
	ReasonUAAutomation: "user agent shows browser automation",
	ReasonUABot:        "user agent is a bot, crawler or HTTP library",
}

// reasonSources says whose stored signals give a reason (Reason.Source);
// reasons read from the query alone have none.
var reasonSources = map[string]string{
	ReasonEmailTumbling: SourceOwn, ReasonEmailVelocity: SourceOwn, ReasonEmailNew: SourceOwn,
	ReasonEmailEstablished: SourceOwn, ReasonDomainNew: SourceOwn, ReasonIPVelocity: SourceOwn,
	ReasonPhoneVelocity: SourceOwn, ReasonEmailVelocityNetwork: SourceNetwork,
	ReasonEmailReported: SourceOwn, ReasonIPReported: SourceOwn, ReasonPhoneReported: SourceOwn,
	ReasonEmailReportedNetwork: SourceNetwork, ReasonIPReportedNetwork: SourceNetwork, ReasonPhoneReportedNetwork: SourceNetwork,
}

// ReasonCodes returns every known reason code with its description.
func ReasonCodes() map[string]string {
	out := make(map[string]string, len(reasonDescriptions))
	for k, v := range reasonDescriptions {
		out[k] = v
	}
	return out
}
