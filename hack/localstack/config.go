package main

import (
	_ "embed"
	"flag"
	"fmt"
	"os"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/localstack"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

// localDefaults are the local stack's settings without a --config file
// (configuration.yaml, beside this file): the Configuration's defaults
// but offline, with loopback callbacks, text logs and lists in-process.
//
//go:embed configuration.yaml
var localDefaults []byte

// crdDir holds the CRD manifests, under the repository root that make run
// and the tests start the stack in.
const crdDir = "config/crd/bases"

// The stack applies the sections its flags used to set: verification and
// fleet (the manager's, the API's and, by reference, the Job pods'
// engines), pipeline.shardBytes, maxShards, shardBy and limits,
// manager.callbackAllowCIDRs, executor.mode and logging. Partial: the
// other keys (api.*, fraud.*, people, store, namespaces, executor.jobs.*)
// load and print but the stack keeps its own values for them (its own
// store and people, in-memory fraud history), as it did before it read a
// file; localstack.Options would have to take the Configuration whole.

// loadConfig is the local stack's configuration: localDefaults, the file
// at path (if any) read over them (a key it writes replaces the local
// default, an empty list included; a key it leaves out keeps it), then the
// environment's URLs, as the binaries read theirs (wiring.LoadConfig).
func loadConfig(path string) (*cfgv1.Configuration, error) {
	c := cfgv1.Default()
	if err := cfgv1.DecodeInto(c, localDefaults); err != nil {
		return nil, fmt.Errorf("hack/localstack/configuration.yaml: %w", err)
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := cfgv1.DecodeInto(c, data); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	cfgv1.ApplyEnv(c)
	return c, nil
}

// flags are the local stack's own: where its state lives, what listens
// where, how lists run; every setting is the Configuration's
// (docs/configuration.md's migration table names each former flag's key).
type flags struct {
	dir, workerDir, store                 string
	metrics, probe, apiListen, apiMetrics string
	s3Port                                int
	printConfig                           bool
	lo                                    logging.Options
}

// bindFlags binds the local stack's flags on fs, conf's values as the
// defaults of those that override it (--executor, --log-level,
// --log-format; wiring.ApplyFlags writes them back into conf).
func bindFlags(fs *flag.FlagSet, conf *cfgv1.Configuration) *flags {
	f := &flags{}
	fs.String("config", "", "configuration file (kind Configuration, see docs/configuration.md; make run CONFIG=path), read over hack/localstack/configuration.yaml (offline: no DNS, no SMTP)")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the effective configuration (secrets redacted) and exit")
	fs.StringVar(&f.dir, "dir", ".local", "state directory (kubeconfig, etcd data, blob store)")
	fs.StringVar(&f.metrics, "metrics-bind-address", "127.0.0.1:18080", "manager metrics address (0 disables)")
	fs.StringVar(&f.probe, "health-probe-bind-address", "127.0.0.1:18081", "manager health address (0 disables)")
	fs.StringVar(&f.apiListen, "api-listen", "127.0.0.1:8090", "REST API address")
	fs.StringVar(&f.apiMetrics, "api-metrics-bind-address", "127.0.0.1:8091", "REST API metrics address (0 disables)")
	fs.String("executor", conf.Executor.Mode, "local (shards run in the manager) or job (Indexed Jobs, pods run as local processes); overrides executor.mode")
	fs.StringVar(&f.workerDir, "worker-dir", "bin", "directory of the worker binary, for --executor=job")
	fs.StringVar(&f.store, "store", localstack.StoreFile, "file (a directory under --dir) or s3 (a local S3-compatible server, SeaweedFS, its data under --dir; built by hack/s3-server.sh)")
	fs.IntVar(&f.s3Port, "s3-port", 8333, "port of the local S3 API, for --store=s3 (0: any free port)")
	f.lo.BindFlags(fs, wiring.LoggingFrom(conf))
	return f
}
