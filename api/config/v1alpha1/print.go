package v1alpha1

import (
	"net/url"
	"os"
)

// EnvURLs are the environment variables that fill a URL the file leaves
// empty: where a URL with a password comes from (a Secret's key in the
// environment), as it did before the file.
var EnvURLs = map[string]func(*Configuration) *string{
	"BLOB_URL":          func(c *Configuration) *string { return &c.Store.URL },
	"FLEET_URL":         func(c *Configuration) *string { return &c.Fleet.URL },
	"HISTORY_URL":       func(c *Configuration) *string { return &c.Verification.History.URL },
	"FRAUD_HISTORY_URL": func(c *Configuration) *string { return &c.Fraud.HistoryURL },
	"PEOPLE_URL":        func(c *Configuration) *string { return &c.People.URL },
	"WORKER_IMAGE":      func(c *Configuration) *string { return &c.Executor.Jobs.Image },
	"POD_NAMESPACE":     func(c *Configuration) *string { return &c.Namespaces.Operator },
}

// ApplyEnv fills the fields the file left empty from their environment
// variables (EnvURLs), and the default operator namespace.
func ApplyEnv(c *Configuration) {
	for env, f := range EnvURLs {
		if p := f(c); *p == "" {
			*p = os.Getenv(env)
		}
	}
	if c.Namespaces.Operator == "" {
		c.Namespaces.Operator = DefaultOperatorNamespace
	}
}

// DefaultOperatorNamespace is the operator's namespace when neither the
// file nor $POD_NAMESPACE names one.
const DefaultOperatorNamespace = "emaildata-system"

// Redacted returns a copy of c without secrets: the passwords of its URLs.
func Redacted(c *Configuration) *Configuration {
	r := *c
	for _, f := range EnvURLs {
		p := f(&r)
		*p = redactURL(*p)
	}
	r.Verification.Proxies.URLs = nil
	for _, u := range c.Verification.Proxies.URLs {
		r.Verification.Proxies.URLs = append(r.Verification.Proxies.URLs, redactURL(u))
	}
	return &r
}

// RedactURL is raw with its password, if any, redacted.
func RedactURL(raw string) string { return redactURL(raw) }

func redactURL(raw string) string {
	if !HasPassword(raw) {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "REDACTED"
	}
	return u.Redacted()
}

// Marshal renders c as YAML, secrets redacted: what --print-config shows.
func Marshal(c *Configuration) ([]byte, error) { return toYAML(Redacted(c)) }
