// Package callback validates and delivers list-completion callbacks: a single
// HTTP POST with a small JSON body to a user-supplied callback_url.
//
// Because the URL comes from users, the package is built to resist
// server-side request forgery (SSRF) in two layers:
//
//   - ValidateURL runs at submission time. It is purely syntactic for host
//     names (no DNS lookups, so the API server never resolves attacker input)
//     and rejects IP literals that the Policy forbids, plus numeric shorthands
//     such as "2130706433" or "0x7f.1" that some resolvers turn into 127.0.0.1.
//   - The *http.Client returned by Policy.Client checks every address the
//     dialer is about to connect to (net.Dialer.Control). That check happens
//     after DNS resolution, for every connection, so DNS rebinding and
//     exotic host spellings cannot bypass it. This layer is the one that
//     actually enforces the policy; ValidateURL only gives users early,
//     precise feedback.
//
// Deliver performs exactly one attempt and never sleeps; callers (the
// controller) record attempts in status and use Backoff to schedule retries.
package callback
