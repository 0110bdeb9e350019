// Command worker processes lists. It is the entrypoint of the Jobs the
// manager creates (one Indexed Job per list, one index per shard), and it
// also runs standalone on a local file.
//
//	worker shard --list-uid UID --blob-url URL [--index N]
//	worker run --in list.csv --out result.csv [--service email_validation] [--delimiter comma] [--header] [--email-column 1]
//	worker people-generate --n 100000 --seed 1 --out people.csv
//	worker people-import --people-url bolt:///data/people.db --in people.csv [--continue-on-error]
//
// Exit codes: 0 success, 1 failure worth retrying, 42 a problem with the
// list itself (the Job fails the index at once), 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/catalog"
	"github.com/emaildata/emaildata/internal/listfile"
	"github.com/emaildata/emaildata/internal/listservice"
	"github.com/emaildata/emaildata/internal/people"
	"github.com/emaildata/emaildata/internal/pipeline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: worker shard|run|people-import|people-generate [flags]")
		return 2
	}
	var err error
	switch args[0] {
	case "shard":
		err = runShard(ctx, args[1:])
	case "run":
		err = runLocal(ctx, args[1:])
	case "people-import":
		err = runPeopleImport(ctx, args[1:], os.Stdout)
	case "people-generate":
		err = runPeopleGenerate(args[1:], os.Stdout)
	default:
		fmt.Fprintf(stderr, "unknown command %q; want shard, run, people-import or people-generate\n", args[0])
		return 2
	}
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, err)
		return 2
	case pipeline.IsBadInput(err):
		fmt.Fprintln(stderr, "bad input:", err)
		return controllers.ExitBadInput
	default:
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
}

type usageError struct{ error }

// registry builds the list services from the verification flags and, when
// given, the reference people store.
func registry(ctx context.Context, vc catalog.VerifyConfig, peopleURL string, store *blobstore.Store) (*listservice.Registry, error) {
	e, err := catalog.NewEngine(ctx, vc)
	if err != nil {
		return nil, usageError{err}
	}
	if vc.ListsBlobKey != "" && store != nil {
		if err := catalog.ApplyPublishedLists(ctx, e, store, vc.ListsBlobKey); err != nil {
			return nil, err
		}
	}
	reg := catalog.Registry(e)
	if peopleURL != "" {
		ps, err := people.Open(ctx, peopleURL)
		if err != nil {
			return nil, err
		}
		catalog.RegisterPeople(reg, ps, nil)
	}
	return reg, nil
}

func limitsFlags(fs *flag.FlagSet) *listfile.Limits {
	lim := pipeline.DefaultConfig().Limits
	fs.Int64Var(&lim.MaxExpandedBytes, "max-expanded-bytes", lim.MaxExpandedBytes, "largest uncompressed size of a zipped list")
	fs.IntVar(&lim.MaxRecordBytes, "max-record-bytes", lim.MaxRecordBytes, "largest single row")
	return &lim
}

func runShard(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	uid := fs.String("list-uid", "", "UID of the EmailList")
	blobURL := fs.String("blob-url", os.Getenv("BLOB_URL"), "blob store URL")
	index := fs.Int("index", -1, "shard index (default: $JOB_COMPLETION_INDEX)")
	lim := limitsFlags(fs)
	vc := catalog.DefaultVerifyConfig()
	vc.BindFlags(fs)
	peopleURL := fs.String("people-url", os.Getenv("PEOPLE_URL"), "reference people store")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *index < 0 {
		v, err := strconv.Atoi(os.Getenv("JOB_COMPLETION_INDEX"))
		if err != nil {
			return usageError{errors.New("no --index and no JOB_COMPLETION_INDEX")}
		}
		*index = v
	}
	if *uid == "" || *blobURL == "" {
		return usageError{errors.New("--list-uid and --blob-url are required")}
	}
	store, err := blobstore.Open(ctx, *blobURL)
	if err != nil {
		return err
	}
	defer store.Close()
	reg, err := registry(ctx, vc, *peopleURL, store)
	if err != nil {
		return err
	}
	sum, err := pipeline.RunShard(ctx, store, blobstore.ListKeys{UID: *uid}, *index, reg, *lim)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "shard %d: %d rows\n", *index, sum.Rows)
	return nil
}

// runLocal processes a local file with the same pipeline the cluster runs,
// through an in-memory store.
func runLocal(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	in := fs.String("in", "", "input list file (.csv, .txt or .zip)")
	out := fs.String("out", "", "result file to write")
	service := fs.String("service", "email_validation", "list service")
	delim := fs.String("delimiter", "tab", "comma, pipe or tab")
	header := fs.Bool("header", false, "the first row is a header")
	emailCol := fs.Int("email-column", 1, "1-based email column")
	lim := limitsFlags(fs)
	vc := catalog.DefaultVerifyConfig()
	vc.DNSServer = "off" // standalone runs are offline unless asked
	vc.BindFlags(fs)
	peopleURL := fs.String("people-url", os.Getenv("PEOPLE_URL"), "reference people store")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *in == "" || *out == "" {
		return usageError{errors.New("--in and --out are required")}
	}
	d, ok := map[string]byte{"comma": ',', "pipe": '|', "tab": '\t', ",": ',', "|": '|'}[*delim]
	if !ok {
		return usageError{fmt.Errorf("--delimiter %q: want comma, pipe or tab", *delim)}
	}
	reg, err := registry(ctx, vc, *peopleURL, nil)
	if err != nil {
		return err
	}
	svc, err := reg.Lookup(*service)
	if err != nil {
		return usageError{err}
	}
	store, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return err
	}
	defer store.Close()

	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	w, err := store.NewWriter(ctx, "upload", nil)
	if err != nil {
		f.Close()
		return err
	}
	_, err = io.Copy(w, f)
	f.Close()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", *in, err)
	}

	keys := blobstore.ListKeys{UID: "local"}
	cfg := pipeline.DefaultConfig()
	cfg.Limits = *lim
	plan, err := pipeline.Prepare(ctx, store, keys, pipeline.Request{
		Source:  pipeline.Source{Key: "upload", Name: filepath.Base(*in)},
		Dialect: listfile.Dialect{Delimiter: d, Header: *header, EmailColumn: *emailCol},
		Service: *service,
	}, svc, cfg)
	if err != nil {
		return err
	}
	for i := range plan.Shards {
		if _, err := pipeline.RunShard(ctx, store, keys, i, reg, cfg.Limits); err != nil {
			return err
		}
	}
	res, err := pipeline.Merge(ctx, store, keys, plan, filepath.Base(*out))
	if err != nil {
		return err
	}
	data, err := store.ReadAll(ctx, res.Key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d rows in %d shards -> %s (%d bytes, sha256 %s)\n", res.Rows, len(plan.Shards), *out, res.Bytes, res.SHA256)
	return nil
}
