// Package people is the reference data of the bulk demographics append: a
// store of people (Store, with an embedded and a PostgreSQL backend chosen
// by URL in Open), a streaming CSV importer (Import), a matcher that finds
// the person, or their household, behind a bulk input item (Match), and a
// deterministic generator of synthetic people for tests and benchmarks
// (Generate, WriteCSV).
//
// # What the store keeps
//
// One entry per person, keyed by the normalised email (trimmed,
// lower-cased), holding exactly the Record fields and nothing else:
//
//   - email (the key);
//   - first, middle and last name;
//   - postal address: street, city, state (two-letter code), zip;
//   - household id (an opaque string shared by the people of a household);
//   - demographics, each unknown (empty) or one value of a fixed bucket
//     list (see Buckets): age, gender, household_income, net_worth,
//     home_market_value, home_owner_status, length_of_residence,
//     marital_status, presence_of_children, education, occupation;
//   - interests, a set of names from a fixed list.
//
// Besides the entry, the store keeps three indexes that point back at it:
// the MD5 and the SHA-1 of the normalised email (as raw digests), so that
// a hashed lookup never needs the plain address, and the household id.
// It keeps no timestamps, no source or import history, no input rows of
// lookups or matches, and no other personal data. Upsert replaces a
// person's entry whole (and moves the household index entry); Delete
// removes the entry and its three index entries.
//
// Embedded layout (bbolt, one file): buckets people (email -> record in a
// compact binary form, codec.go), md5 and sha1 (digest -> email) and
// household (household id, 0x00, email -> empty). PostgreSQL layout (in the
// schema named by the URL): table people (email primary key, email_md5,
// email_sha1, household_id, name, address and demographic text columns,
// interests text[]) with indexes on email_md5, email_sha1 and household_id,
// and table people_schema_version; Open creates or migrates them.
//
// Errors of this package (FieldError, RecordError, RowError) name fields,
// record indexes and line numbers, never values, so they can be logged.
package people
