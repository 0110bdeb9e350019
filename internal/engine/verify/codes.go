package verify

import "strconv"

// Code is a numeric verification status code, as returned in the
// "status_code" field of a SafeToSend response.
type Code int

// Status is the coarse verdict word that each Code maps to.
type Status string

// Status words.
const (
	StatusSafeToSend Status = "safetosend"
	StatusValid      Status = "valid"
	StatusInvalid    Status = "invalid"
	StatusTrap       Status = "trap"
	StatusUnknown    Status = "unknown"
)

// Status codes. The syntax stage only produces 10 and 100–215; the others
// are reserved for the later corrections, lists, DNS and SMTP stages.
const (
	CodeTimeout     Code = 5  // timed out
	CodeValidSyntax Code = 10 // syntax OK, nothing more checked
	CodeValidDomain Code = 20 // domain OK, mailbox unconfirmed
	CodeCatchAll    Code = 45 // domain accepts any mailbox
	CodeDeliverable Code = 50 // deliverable (safetosend)

	CodeSyntaxError              Code = 100 // general syntax error
	CodeInvalidCharacter         Code = 110 // invalid character
	CodeDomainSyntax             Code = 115 // domain syntax error
	CodeUsernameSyntax           Code = 120 // username (local part) syntax error
	CodeUsernameInvalidForDomain Code = 125 // username not valid for that domain
	CodeTooLong                  Code = 130 // address too long
	CodeUnbalanced               Code = 135 // unbalanced brackets or quotes
	CodeNoUsername               Code = 140 // no username
	CodeNoDomain                 Code = 145 // no domain
	CodeNoAt                     Code = 150 // no @ sign
	CodeMultipleAt               Code = 155 // more than one @ sign
	CodeInvalidTLD               Code = 200 // invalid top-level domain
	CodeExtraCharacter           Code = 210 // extra space or character
	CodeUnquotedSpace            Code = 215 // unquoted spaces
	CodeSuppressed               Code = 255 // suppressed
	CodeDomainNotFound           Code = 310 // domain does not exist
	CodeDomainNoIP               Code = 315 // domain has no valid IP
	CodeDomainNoMail             Code = 325 // domain cannot receive mail
	CodeMailboxNotFound          Code = 400 // mailbox does not exist
	CodeMailboxFull              Code = 410 // mailbox full
	CodeMailNotAccepted          Code = 420 // mail not accepted for this domain
	CodeUsernameNotAccepted      Code = 500 // dangerous username, e.g. abuse@
	CodeDomainNotAccepted        Code = 505 // domain not accepted
	CodeAddressNotAccepted       Code = 510 // address not accepted
	CodeKnownBouncer             Code = 520 // known bouncer
	CodeSpamTrap                 Code = 525 // spam trap, disposable or high risk
	CodeOptedOut                 Code = 530 // opted out
	CodeSystemError              Code = 999 // system error
)

type codeInfo struct {
	status  Status
	meaning string
}

var codeTable = map[Code]codeInfo{
	CodeTimeout:                  {StatusUnknown, "timed out"},
	CodeValidSyntax:              {StatusValid, "syntax OK, nothing more checked"},
	CodeValidDomain:              {StatusValid, "domain OK, mailbox unconfirmed"},
	CodeCatchAll:                 {StatusValid, "catch-all domain"},
	CodeDeliverable:              {StatusSafeToSend, "deliverable"},
	CodeSyntaxError:              {StatusInvalid, "general syntax error"},
	CodeInvalidCharacter:         {StatusInvalid, "invalid character"},
	CodeDomainSyntax:             {StatusInvalid, "domain syntax error"},
	CodeUsernameSyntax:           {StatusInvalid, "username syntax error"},
	CodeUsernameInvalidForDomain: {StatusInvalid, "username not valid for that domain"},
	CodeTooLong:                  {StatusInvalid, "address too long"},
	CodeUnbalanced:               {StatusInvalid, "unbalanced brackets or quotes"},
	CodeNoUsername:               {StatusInvalid, "no username"},
	CodeNoDomain:                 {StatusInvalid, "no domain"},
	CodeNoAt:                     {StatusInvalid, "no @ sign"},
	CodeMultipleAt:               {StatusInvalid, "more than one @ sign"},
	CodeInvalidTLD:               {StatusInvalid, "invalid top-level domain"},
	CodeExtraCharacter:           {StatusInvalid, "extra space or character"},
	CodeUnquotedSpace:            {StatusInvalid, "unquoted spaces"},
	CodeSuppressed:               {StatusInvalid, "suppressed"},
	CodeDomainNotFound:           {StatusInvalid, "domain does not exist"},
	CodeDomainNoIP:               {StatusInvalid, "domain has no valid IP"},
	CodeDomainNoMail:             {StatusInvalid, "domain cannot receive mail"},
	CodeMailboxNotFound:          {StatusInvalid, "mailbox does not exist"},
	CodeMailboxFull:              {StatusInvalid, "mailbox full"},
	CodeMailNotAccepted:          {StatusInvalid, "mail not accepted for this domain"},
	CodeUsernameNotAccepted:      {StatusInvalid, "username not accepted"},
	CodeDomainNotAccepted:        {StatusInvalid, "domain not accepted"},
	CodeAddressNotAccepted:       {StatusInvalid, "address not accepted"},
	CodeKnownBouncer:             {StatusInvalid, "known bouncer"},
	CodeSpamTrap:                 {StatusTrap, "spam trap, disposable or high risk"},
	CodeOptedOut:                 {StatusTrap, "opted out"},
	CodeSystemError:              {StatusUnknown, "system error"},
}

// Status returns the verdict word for c; codes outside the table are
// StatusUnknown so a bad code never reads as deliverable.
func (c Code) Status() Status {
	if info, ok := codeTable[c]; ok {
		return info.status
	}
	return StatusUnknown
}

// String returns a short English meaning of c, or "Code(N)" for codes
// outside the table.
func (c Code) String() string {
	if info, ok := codeTable[c]; ok {
		return info.meaning
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}
