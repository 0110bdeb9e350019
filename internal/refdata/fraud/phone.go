package fraud

import (
	"strings"

	"github.com/nyaruka/phonenumbers"

	"github.com/emaildata/emaildata/internal/refdata/phone"
)

// Phone statuses reported in risk.phone.status.
const (
	PhoneValid     = "valid"
	PhoneInvalid   = "invalid"
	PhoneMalformed = "malformed"
)

// phoneSignals evaluates the phone input: parseable, valid, line type,
// country (against the given country, or the IP country when none is
// given).
func (a *assessor) phoneSignals(raw string) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return
	}
	// No phone ownership data source: the owner is unknown.
	info := &PhoneInfo{Owner: &PhoneOwner{FirstNameMatch: NoData, LastNameMatch: NoData, StreetMatch: NoData, CityMatch: NoData, ZipMatch: NoData}}
	a.out.Risk.Phone = info
	region := a.country
	if region == "" {
		region = a.cfg.DefaultPhoneRegion
	}
	if region == "" {
		region = "US"
	}
	num, err := phonenumbers.Parse(raw, region)
	if err != nil {
		info.Status = PhoneMalformed
		a.add(ReasonPhoneMalformed)
		return
	}
	a.phoneKey = phonenumbers.Format(num, phonenumbers.E164)
	if !phonenumbers.IsValidNumber(num) {
		info.Status = PhoneInvalid
		a.add(ReasonPhoneInvalid)
		return
	}
	info.Status = PhoneValid
	info.Country = phonenumbers.GetRegionCodeForNumber(num)
	typ := phonenumbers.GetNumberType(num)
	info.LineType = phone.LineType(typ)
	switch typ {
	case phonenumbers.VOIP:
		a.add(ReasonPhoneVOIP)
	case phonenumbers.PREMIUM_RATE, phonenumbers.SHARED_COST:
		a.add(ReasonPhonePremium)
	case phonenumbers.TOLL_FREE, phonenumbers.UAN:
		a.add(ReasonPhoneTollFree)
	case phonenumbers.PAGER:
		a.add(ReasonPhonePager)
	case phonenumbers.MOBILE:
		a.add(ReasonPhoneMobile)
	case phonenumbers.FIXED_LINE, phonenumbers.FIXED_LINE_OR_MOBILE:
		a.add(ReasonPhoneLandline)
	}
	if typ == phonenumbers.MOBILE || typ == phonenumbers.FIXED_LINE_OR_MOBILE {
		if c, err := phonenumbers.GetCarrierForNumber(num, "en"); err == nil {
			info.Carrier = c
		}
	}
	switch {
	case info.Country == "" || info.Country == "001":
	case a.country != "":
		if info.Country != a.country {
			a.add(ReasonPhoneCountryMismatch)
		}
	case a.ipCountry != "" && info.Country != a.ipCountry:
		a.add(ReasonIPPhoneCountry)
	}
}

// normCountry upper-cases an ISO 3166 alpha-2 code and checks it; "UK" is
// accepted for GB.
func normCountry(s string) (string, bool) {
	c := strings.ToUpper(strings.TrimSpace(s))
	if c == "UK" {
		c = "GB"
	}
	if len(c) != 2 || !isoCountries[c] {
		return "", false
	}
	return c, true
}

// isoCountries are the officially assigned ISO 3166-1 alpha-2 codes.
var isoCountries = func() map[string]bool {
	const all = "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
		"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR " +
		"GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP " +
		"KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT " +
		"MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW " +
		"SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG " +
		"UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW"
	m := map[string]bool{}
	for _, c := range strings.Fields(all) {
		m[c] = true
	}
	return m
}()
