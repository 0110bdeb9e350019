package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// runPeopleImport loads a CSV of people (header row naming Record columns)
// into the reference store: `worker people-import --people-url URL
// (--in FILE | --blob-url URL --key KEY) [--continue-on-error]`.
func runPeopleImport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("people-import", flag.ContinueOnError)
	peopleURL := fs.String("people-url", os.Getenv("PEOPLE_URL"), "reference people store (bolt:///path.db or postgres://...)")
	in := fs.String("in", "", "local CSV file")
	blobURL := fs.String("blob-url", os.Getenv("BLOB_URL"), "blob store holding the CSV (with --key)")
	key := fs.String("key", "", "blob key of the CSV")
	summaryKey := fs.String("summary-key", "", "blob key to write the JSON summary to")
	cont := fs.Bool("continue-on-error", false, "skip malformed rows (reported by line) instead of stopping")
	maxErrors := fs.Int("max-errors", 100, "with --continue-on-error, stop after this many malformed rows")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if *peopleURL == "" || (*in == "") == (*key == "") {
		return usageError{errors.New("--people-url and exactly one of --in or --key are required")}
	}
	var (
		src   io.ReadCloser
		store *blobstore.Store
		err   error
	)
	if *key != "" || *summaryKey != "" {
		if *blobURL == "" {
			return usageError{errors.New("--key and --summary-key need --blob-url")}
		}
		if store, err = blobstore.Open(ctx, *blobURL); err != nil {
			return err
		}
		defer store.Close()
	}
	if *in != "" {
		src, err = os.Open(*in)
	} else {
		src, err = store.NewReader(ctx, *key, nil)
	}
	if err != nil {
		return fmt.Errorf("open input: %w", err)
	}
	defer src.Close()

	ps, err := people.Open(ctx, *peopleURL)
	if err != nil {
		return err
	}
	defer ps.Close()
	res, ierr := people.Import(ctx, ps, bufio.NewReaderSize(src, 1<<20), people.ImportOptions{ContinueOnError: *cont, MaxErrors: *maxErrors})
	// people.ImportSummary, on stdout and at --summary-key (the Dataset
	// controller reads it).
	sum := people.Summarize(res, ierr)
	if *summaryKey != "" {
		if err := store.WriteJSON(context.WithoutCancel(ctx), *summaryKey, sum); err != nil {
			return errors.Join(ierr, err)
		}
	}
	_ = json.NewEncoder(stdout).Encode(sum)
	if ierr != nil {
		if res.Failed > 0 && ctx.Err() == nil {
			return pipeline.BadInput(ierr) // a malformed file: retrying cannot help
		}
		return ierr
	}
	return nil
}

// runPeopleGenerate writes deterministic synthetic people as CSV:
// `worker people-generate --n 100000 --seed 1 --out people.csv`.
func runPeopleGenerate(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("people-generate", flag.ContinueOnError)
	n := fs.Int("n", 1000, "people to generate")
	seed := fs.Uint64("seed", 1, "seed; the same seed gives the same people")
	out := fs.String("out", "-", "output CSV file (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if *n < 0 {
		return usageError{errors.New("--n must not be negative")}
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := people.WriteCSV(bw, people.Generate(*seed, *n)); err != nil {
		return err
	}
	return bw.Flush()
}
