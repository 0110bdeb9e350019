// Package peoplelist runs the two list services backed by the reference
// people store (package people): email_intelligence (demographics appended
// to an email list) and email_append (an email found for a name and postal
// address).
//
// # email_intelligence
//
// Every row needs the email column (listservice.Input.EmailIndex; a 32- or
// 40-digit hex value there is taken as an MD5 or SHA-1 digest, as
// people.Match does). Header columns naming the person (first, middle, last,
// street, city, state, zip and the variants HeaderAliases lists) are passed
// to people.Match as well: they raise the match confidence and, when the
// name conflicts with the email owner's, keep the row from matching; a row
// whose email finds nobody is matched by name and postal address when it
// has them (people.Match). Only an Individual match fills the demographic
// columns (IntelligenceColumns: every demographic field of the store, then
// interests); Household and no match leave them empty. Each batch is one
// people.Match call.
//
// Reporting: {"<column>": {"Total Count": n}} for every demographic column,
// n being the rows whose Individual match has a non-empty value there (all
// columns are present, with 0 when nothing counted).
//
// # email_append
//
// email_append runs on a store that also implements PostalFinder
// (people.NamePostalFinder; the bolt and PostgreSQL stores do: they keep a
// last name + 5-digit zip index and a last name + state + city index).
// PostalIndex is an in-memory PostalFinder, built from records (for tests,
// or loaded from the same source as the store), and WithPostalIndex
// attaches one to a store, taking precedence over the store's own index.
//
// It needs a header: the first, last and zip columns are required (a person
// is found by last name and 5-digit zip, or by last name, city and state on
// rows whose zip is empty or invalid, and identified by first name);
// street, city and state are optional. Each batch is one
// people.MatchNamePostal call, the matcher GET /v5/eppend uses too:
//
//   - Individual: exactly one candidate has the row's first name (compared
//     case-insensitively on letters only). Its email is appended.
//   - Household: otherwise, when the row has a street and the candidates
//     whose street agrees with it (normalised: suffixes and directions
//     abbreviated, units dropped) all belong to one household (same
//     household id; a candidate without one is its own household). The
//     household's primary member's email is appended: the first of those
//     candidates in the finder's order (for PostalIndex, load order, which
//     for generated data is the household's head; for the stores, email
//     order). Several candidates with the row's first name in one household
//     also give a Household match.
//   - No match otherwise (including ambiguous matches spanning households).
//
// Candidates whose street, city or state conflict with the row's (both
// given and different) are dropped first.
//
// EmailAppend.MatchType is the purchase option
// options.email_append.match_type: "I" keeps Individual matches only, "H"
// (or "") Individual and Household matches.
//
// Reporting: {"email_match_type": {"Individual match": n, "Household match": n}}
// (both buckets always present).
//
// Neither service logs; errors name services, columns and counts, never
// row values.
package peoplelist
