package restapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/platform/logging"
)

// RunOptions configure a running API server.
type RunOptions struct {
	Config
	// Listen is the address to serve on; Listener, when set, is used instead.
	Listen   string
	Listener net.Listener
	// KeyNamespace is the operator's namespace: it holds the list ID
	// counter and the installation secrets, and, unless APIKeyNamespace
	// says otherwise, the API key Secrets.
	KeyNamespace    string
	ListIDConfigMap string
	// APIKeyNamespace is where the API key Secrets are watched (default
	// KeyNamespace). The watch needs list and watch on Secrets there, which
	// RBAC cannot narrow to the labelled ones: a namespace holding key
	// Secrets alone keeps every other Secret (Helm's release records among
	// them) out of the API's reach (docs/install.md).
	APIKeyNamespace string
	// Secrets names the installation secrets, read by name in KeyNamespace.
	Secrets installsecret.Config
	// SecretsRecheck is how often a missing installation secret the API
	// needs to start is looked for again (LoadInstallationKeys; default
	// DefaultSecretsRecheck).
	SecretsRecheck time.Duration
	// BlobURL names the store; Store, when set, is used instead.
	BlobURL string
	Store   *blobstore.Store
	// ShutdownTimeout bounds draining in-flight requests (uploads) on stop.
	ShutdownTimeout time.Duration
	// DrainDelay keeps serving, not ready, before shutdown, so load
	// balancers stop sending new requests first.
	DrainDelay time.Duration
	Log        *slog.Logger
	// Ready, when set, is called once the server accepts requests.
	Ready func(addr string)
	// MetricsListen is the address of GET /metrics (empty or "0": not
	// served); MetricsListener, when set, is used instead. MetricsReady,
	// when set, is called with its address once it serves.
	MetricsListen   string
	MetricsListener net.Listener
	MetricsReady    func(addr string)
}

// Run serves the API until ctx ends, then drains in-flight requests.
func Run(ctx context.Context, cfg *rest.Config, o RunOptions) error {
	o.defaults()
	cl, keys, keysSynced, err := newCluster(ctx, cfg, o)
	if err != nil {
		return err
	}
	store := o.Store
	if store == nil {
		if store, err = blobstore.Open(ctx, o.BlobURL); err != nil {
			return err
		}
		defer store.Close()
	}
	ids := &listid.Allocator{Reader: cl.GetAPIReader(), Writer: cl.GetClient(), Namespace: o.KeyNamespace, Name: o.ListIDConfigMap,
		Obscure: true, KeySecret: o.Secrets.Name(installsecret.ListIDKey)}
	srv := New(o.Config, keys, cl.GetClient(), cl.GetAPIReader(), store, ids, o.Log)

	cctx, cancelCluster := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCluster()
	clusterDone := make(chan error, 1)
	go func() { clusterDone <- cl.Start(cctx) }()
	if !cl.GetCache().WaitForCacheSync(ctx) {
		return errors.New("API caches did not sync")
	}
	// Serve once every key Secret is in the key store: a valid key answered
	// 401 by a replica still loading would count as a failed key check
	// against its client's address.
	if !toolscache.WaitForCacheSync(ctx.Done(), keysSynced) {
		return errors.New("API keys did not load")
	}

	var draining atomic.Bool
	srv.notReady = draining.Load
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.Listen); err != nil {
			return err
		}
	}
	stopMetrics, err := serveMetrics(&o, srv)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	defer stopMetrics()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	o.Log.Info("API serving", "addr", ln.Addr().String(), "keys", keys.Len())
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}

	select {
	case err := <-serveErr:
		return err
	case err := <-clusterDone:
		return fmt.Errorf("cluster client stopped: %w", err)
	case <-ctx.Done():
	}
	return drain(hs, &draining, o)
}

// defaults fills unset options.
func (o *RunOptions) defaults() {
	if o.KeyNamespace == "" {
		o.KeyNamespace = listid.DefaultNamespace
	}
	if o.Namespace == "" {
		o.Namespace = o.KeyNamespace
	}
	if o.ListIDConfigMap == "" {
		o.ListIDConfigMap = listid.DefaultConfigMap
	}
	if o.CallbackSigningNamespace == "" {
		o.CallbackSigningNamespace = o.KeyNamespace
	}
	if o.APIKeyNamespace == "" {
		o.APIKeyNamespace = o.KeyNamespace
	}
	if o.CallbackSigningSecret == "" {
		o.CallbackSigningSecret = o.Secrets.Name(installsecret.CallbackSigning)
	}
	if o.SecretsRecheck <= 0 {
		o.SecretsRecheck = DefaultSecretsRecheck
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = cfgv1.Default().API.ShutdownTimeout.Duration
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// newCluster builds the cluster client whose caches hold the key Secrets
// and the lists, and the key store fed by the Secret informer; keysSynced
// reports when the store holds the Secrets the informer first listed.
func newCluster(ctx context.Context, cfg *rest.Config, o RunOptions) (_ cluster.Cluster, _ *apikey.Store, keysSynced toolscache.InformerSynced, _ error) {
	// Lists and Purchases: only where the API creates them.
	namespaces := map[string]cache.Config{o.Namespace: {}}
	cl, err := cluster.New(cfg, func(co *cluster.Options) {
		co.Scheme = kubescheme.New()
		co.Cache = cache.Options{
			DefaultNamespaces: namespaces,
			ByObject: map[client.Object]cache.ByObject{
				// Only key Secrets, only in the key namespace (the label
				// narrows what is cached; RBAC cannot narrow list/watch).
				&corev1.Secret{}: {
					Namespaces: map[string]cache.Config{o.APIKeyNamespace: {}},
					Label:      labels.SelectorFromSet(labels.Set{apikey.Label: "true"}),
				},
			},
		}
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create cluster client: %w", err)
	}
	if err := cl.GetFieldIndexer().IndexField(ctx, &listsv1.EmailList{}, ListIDIndex, IndexListID); err != nil {
		return nil, nil, nil, err
	}
	if err := cl.GetFieldIndexer().IndexField(ctx, &listsv1.EmailList{}, TenantIndex, IndexTenant); err != nil {
		return nil, nil, nil, err
	}
	keys := apikey.NewStore()
	inf, err := cl.GetCache().GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, nil, nil, err
	}
	reg, err := inf.AddEventHandler(keyHandler(keys, o.Log))
	if err != nil {
		return nil, nil, nil, err
	}
	// Lists are read through the cache too; start the informer now.
	if _, err := cl.GetCache().GetInformer(ctx, &listsv1.EmailList{}); err != nil {
		return nil, nil, nil, err
	}
	return cl, keys, reg.HasSynced, nil
}

// drain turns readiness off, waits DrainDelay, then shuts the server down.
func drain(hs *http.Server, draining *atomic.Bool, o RunOptions) error {
	draining.Store(true)
	if o.DrainDelay > 0 {
		time.Sleep(o.DrainDelay)
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	// Shutdown waits for in-flight requests, uploads included.
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return nil
}

// UpsertKeySecret hands a key Secret to the key store as its name and data.
func UpsertKeySecret(keys *apikey.Store, sec *corev1.Secret) error {
	return keys.Upsert(apikey.Source{Namespace: sec.Namespace, Name: sec.Name}, sec.Data)
}

// keyHandler keeps the key store in step with the Secret informer, and
// logs the Secrets it ignores, by name (never a key): invalid ones, and
// those holding one key with different tenants, services or rate limits,
// which the store refuses for all of them until they agree.
func keyHandler(keys *apikey.Store, log *slog.Logger) toolscache.ResourceEventHandler {
	var mu sync.Mutex // informer handlers run one at a time; this is for clarity
	clashing := map[string]bool{}
	noteResolved := func() {
		mu.Lock()
		defer mu.Unlock()
		now := map[string]bool{}
		for _, c := range keys.Clashes() {
			now[strings.Join(c.Secrets, ", ")] = true
		}
		for secrets := range clashing {
			if !now[secrets] {
				log.Info("API key Secrets no longer clash; the key is used again if one of them remains valid", "secrets", secrets)
			}
		}
		clashing = now
	}
	upsert := func(obj any) {
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		var clash *apikey.ClashError
		switch err := UpsertKeySecret(keys, sec); {
		case errors.As(err, &clash):
			log.Warn("refusing an API key held by several Secrets that disagree on it", "secrets", strings.Join(clash.Secrets, ", "),
				"differ", strings.Join(clash.Differ, ", "))
		case err != nil:
			log.Warn("ignoring API key secret", logging.KeyError, err.Error())
		}
		noteResolved()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if sec, ok := obj.(*corev1.Secret); ok {
				keys.Delete(sec.Namespace, sec.Name)
				noteResolved()
			}
		},
	}
}
