package blobstore

import (
	"fmt"
	"path"
)

// ListKeys names the objects of one list. Everything lives under one
// prefix so that deleting the list deletes all of it.
type ListKeys struct {
	// UID of the EmailList; unique for the lifetime of the cluster.
	UID string
}

// Prefix is the common prefix of the list's objects.
func (k ListKeys) Prefix() string { return ListsFolder + k.UID + "/" }

// Input is the prepared plain-text input (extracted from a zip when needed).
func (k ListKeys) Input() string { return k.Prefix() + "input" }

// Staged is the input of a list sharded by domain: its rows regrouped so
// that each shard's rows are contiguous (see pipeline's distribute).
func (k ListKeys) Staged() string { return k.Prefix() + "staged" }

// StagedRows holds the list row numbers of Staged's rows, shard by shard;
// only the shards read it, so it goes with the parts.
func (k ListKeys) StagedRows() string { return k.Prefix() + "parts/staged.rows" }

// Route holds the shard of every row in input order, for the merge of a
// list sharded by domain.
func (k ListKeys) Route() string { return k.Prefix() + "parts/route" }

// PartLengths holds the byte length of every row of Part(i), as uvarints,
// for the merge of a list sharded by domain.
func (k ListKeys) PartLengths(i int) string {
	return fmt.Sprintf("%sparts/%05d.lengths", k.Prefix(), i)
}

// Source is where a ConfigMap source is copied to before preparation.
func (k ListKeys) Source() string { return k.Prefix() + "source" }

// Plan is the shard plan written at preparation.
func (k ListKeys) Plan() string { return k.Prefix() + "plan.json" }

// Parts is the folder of the shards' intermediate objects (parts,
// summaries, progress), deleted once the result is merged and saved.
func (k ListKeys) Parts() string { return k.Prefix() + "parts/" }

// Part is shard i's slice of the result rows.
func (k ListKeys) Part(i int) string { return fmt.Sprintf("%sparts/%05d.part", k.Prefix(), i) }

// Summary is shard i's small outcome document.
func (k ListKeys) Summary(i int) string {
	return fmt.Sprintf("%sparts/%05d.summary.json", k.Prefix(), i)
}

// Repeats lists the rows of shard i that repeat an earlier row of the
// list (written at preparation; see pipeline's dedup).
func (k ListKeys) Repeats(i int) string { return fmt.Sprintf("%sparts/%05d.repeats", k.Prefix(), i) }

// Spill is a temporary sorted run of preparation's duplicate search,
// deleted before preparation ends.
func (k ListKeys) Spill(name string) string { return k.Prefix() + "spill/" + name }

// Progress is shard i's running row count, rewritten as it goes.
func (k ListKeys) Progress(i int) string {
	return fmt.Sprintf("%sparts/%05d.progress.json", k.Prefix(), i)
}

// Result is the merged result file.
func (k ListKeys) Result(fileName string) string { return k.Prefix() + "result/" + path.Base(fileName) }

// DatasetKeys names the objects of one Dataset, under datasets/<uid>/.
type DatasetKeys struct{ UID string }

// Prefix is the folder of all the Dataset's objects.
func (k DatasetKeys) Prefix() string { return DatasetsFolder + k.UID + "/" }

// Source is where a ConfigMap source is copied to.
func (k DatasetKeys) Source() string { return k.Prefix() + "source.csv" }

// Summary is the import summary that the loader (worker) writes.
func (k DatasetKeys) Summary() string { return k.Prefix() + "summary.json" }
