// Command worker processes lists. It is the entrypoint of the Jobs the
// manager creates (one Indexed Job per list, one index per shard), and it
// also runs standalone on a local file.
//
//	worker shard --config FILE --list-uid UID [--index N] [--blob-url URL]
//	worker run --in list.csv --out result.csv [--service email_validation] [--delimiter comma] [--header] [--email-column 1] [--stats]
//	worker people-generate --n 100000 --seed 1 --out people.csv
//	worker people-import --people-url bolt:///data/people.db --in people.csv [--continue-on-error]
//
// Every command takes -h. Exit codes: 0 success, 1 failure worth retrying,
// 42 a problem with the list itself (the Job fails the index at once), 2
// bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

const usage = `usage: worker <command> [flags]

commands:
  run              verify (or enrich) a local list file: worker run --in list.csv --out result.csv
  shard            run one shard of a list in the blob store (the manager's Jobs)
  people-generate  write a deterministic sample people file
  people-import    load a people file into the reference store

"worker <command> -h" lists the command's flags.
`

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return 0
	case "shard":
		err = runShard(ctx, args[1:], stderr)
	case "run":
		err = runLocal(ctx, args[1:], stderr)
	case "people-import":
		err = runPeopleImport(ctx, args[1:], os.Stdout)
	case "people-generate":
		err = runPeopleGenerate(args[1:], os.Stdout)
	default:
		fmt.Fprintf(stderr, "unknown command %q; want shard, run, people-import or people-generate\n", args[0])
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, err)
		return 2
	case pipeline.IsBadInput(err):
		fmt.Fprintln(stderr, "bad input:", err)
		return pipeline.ExitBadInput
	default:
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
}

type usageError struct{ error }

// parseError keeps -h a success (the flag package printed the usage).
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}

// registry builds the list services from the verification flags and, when
// given, the reference people store.
func registry(ctx context.Context, vc wiring.VerifyConfig, peopleURL string, store *blobstore.Store) (*listservice.Registry, error) {
	reg, _, err := registryEngine(ctx, vc, peopleURL, store)
	return reg, err
}

// registryEngine is registry, with the engine (for its counters).
func registryEngine(ctx context.Context, vc wiring.VerifyConfig, peopleURL string, store *blobstore.Store) (*listservice.Registry, *verify.Engine, error) {
	e, err := wiring.NewEngine(ctx, vc)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if vc.ListsBlobKey != "" && store != nil {
		if err := wiring.ApplyPublishedLists(ctx, e, store, vc.ListsBlobKey); err != nil {
			return nil, nil, err
		}
	}
	reg := wiring.RegistryFor(e, vc)
	if peopleURL != "" {
		ps, err := people.Open(ctx, peopleURL)
		if err != nil {
			return nil, nil, err
		}
		wiring.RegisterPeople(reg, ps, nil)
	}
	return reg, e, nil
}

// configFlag loads the --config file of args (the flags bound next start
// from its values, a flag given overrides it) and binds --config itself.
func configFlag(fs *flag.FlagSet, args []string) (*cfgv1.Configuration, error) {
	fs.String("config", "", "configuration file (kind Configuration, config.emaildata.io/v1alpha1; see docs/configuration.md)")
	c, err := wiring.LoadConfig(wiring.ConfigPath(args))
	if err != nil {
		return nil, usageError{fmt.Errorf("configuration: %w", err)}
	}
	return c, nil
}

// shardRun is one `worker shard`: the list, the shard and the store are
// the process's own; every setting is the --config file's (the mounted
// ConfigMap of a list's Job), the per-list values its environment's
// (wiring.ApplyJobEnv).
type shardRun struct {
	conf        *cfgv1.Configuration
	uid         string
	index       int
	blobURL     string
	printConfig bool
}

// bindShard binds the flags of `worker shard` on fs, with conf's values as
// their defaults: what differs per process (issue 32: at most 12 besides
// --config; TestFlagsInMigrationTable).
func bindShard(fs *flag.FlagSet, conf *cfgv1.Configuration) *shardRun {
	r := &shardRun{conf: conf}
	fs.BoolVar(&r.printConfig, "print-config", false, "print the effective configuration (the --config file, its defaults and the flags given; secrets redacted) and exit")
	fs.StringVar(&r.uid, "list-uid", "", "UID of the EmailList")
	fs.IntVar(&r.index, "index", -1, "shard index (default: $JOB_COMPLETION_INDEX)")
	fs.StringVar(&r.blobURL, "blob-url", conf.Store.URL, "blob store URL (overrides store.url; a URL with a password: $BLOB_URL)")
	return r
}

func runShard(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: worker shard --config FILE --list-uid UID [--index N]\n\n"+
			"Runs one shard of a list in the blob store: the manager's Jobs run it, their\n"+
			"configuration mounted (docs/configuration.md), the shard index from\n"+
			"$JOB_COMPLETION_INDEX and the list's share of the mail hosts' budget from\n"+
			"their environment.\n\nflags:\n")
		fs.PrintDefaults()
	}
	conf, err := configFlag(fs, args)
	if err != nil {
		return err
	}
	r := bindShard(fs, conf)
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if r.printConfig {
		fmt.Print(wiring.JobEnvComment())
		if wiring.PrintConfig(os.Stdout, conf, fs) != 0 {
			return usageError{errors.New("the configuration could not be printed")}
		}
		return flag.ErrHelp // done, successfully
	}
	lim := wiring.LimitsFrom(conf)
	vc := wiring.VerifyFrom(conf)
	if err := wiring.ApplyJobEnv(&vc, conf); err != nil {
		return usageError{err}
	}
	if r.index < 0 {
		v, err := strconv.Atoi(os.Getenv("JOB_COMPLETION_INDEX"))
		if err != nil {
			return usageError{errors.New("no --index and no JOB_COMPLETION_INDEX")}
		}
		r.index = v
	}
	if r.uid == "" || r.blobURL == "" {
		return usageError{errors.New("--list-uid and a store (store.url, $BLOB_URL or --blob-url) are required")}
	}
	store, err := blobstore.Open(ctx, r.blobURL)
	if err != nil {
		return err
	}
	defer store.Close()
	reg, err := registry(ctx, vc, conf.People.URL, store)
	if err != nil {
		return err
	}
	sum, err := pipeline.RunShard(ctx, store, blobstore.ListKeys{UID: r.uid}, r.index, reg, lim)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "shard %d: %d rows\n", r.index, sum.Rows)
	return nil
}
