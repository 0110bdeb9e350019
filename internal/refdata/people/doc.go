// Package people is the reference data of the demographics and append
// services: a store of people (Store, with an embedded and a PostgreSQL
// backend chosen by URL in Open), a streaming CSV importer (Import), a
// matcher that finds the person, or their household, behind an input item
// by email and name and postal address (Match; MatchNamePostal for the
// email append rules alone), and a deterministic generator of synthetic
// people for tests and benchmarks (Generate, WriteCSV).
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
//     marital_status, presence_of_children, education, occupation,
//     life_stage_segment, life_stage_group, financial_segment,
//     financial_group;
//   - purchase behaviour, each unknown (empty) or of a checked form:
//     rfm_offline_avg_days and rfm_online_avg_days (whole days),
//     rfm_avg_dollars (dollars, optionally with cents), rfm_last_order
//     (YYYY-MM-DD);
//   - interests, a set of names from a fixed list;
//   - other addresses of the person (alt_emails, at most MaxAltEmails): a
//     lookup by any of them, plain or hashed, finds the person.
//
// Besides the entry, the store keeps indexes that point back at it: the
// MD5 and the SHA-1 of the normalised email (as raw digests), so that a
// hashed lookup never needs the plain address, the household id, the
// normalised last name with the 5-digit zip, and the normalised last name
// with the state and the normalised city (for matching by name and postal
// address), and each other address (and its MD5 and SHA-1) pointing at
// its person's email.
// It keeps no timestamps, no source or import history, no input rows of
// lookups or matches, and no other personal data. Upsert replaces a
// person's entry whole (and moves the household index entry); Delete
// removes the entry and its index entries.
//
// Beside people, the store keeps phone status reference data (PhoneStore,
// phones.go): per E.164 number, whether it is live or disconnected,
// prepaid, and a connected score, each only when a loaded file said so.
//
// Embedded layout (bbolt, one file): buckets people (email -> record in a
// compact binary form, codec.go; values of the earlier format are still
// read), md5 and sha1 (digest -> email), household (household id, 0x00,
// email -> empty), postal and locality, alt, altmd5 and altsha1 (another
// address or its digest -> email) and phones (bolt.go, phones.go); Open
// builds an index bucket a file lacks. PostgreSQL layout (in the schema named by the URL):
// table people (email primary key, email_md5, email_sha1, household_id,
// name, address, demographic and rfm text columns, interests text[], and
// the derived last_name_norm, zip5 and city_norm, alt_emails text[]) with
// indexes on email_md5, email_sha1, household_id, (last_name_norm, zip5)
// and (last_name_norm, state, city_norm), table people_alt_emails (the
// other addresses, their digests and owner), table people_phone_status,
// and table people_schema_version; Open creates or migrates them
// (postgres.go, pgMigrations).
//
// Errors of this package (FieldError, RecordError, RowError) name fields,
// record indexes and line numbers, never values, so they can be logged.
package people
