package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/jobplane"
	"github.com/emaildata/emaildata/internal/operator"
)

// Names of the job executor's pieces in the local stack.
const (
	// WorkerImage is the image of local worker pods; the test node maps it
	// to Options.WorkerDir.
	WorkerImage = "emaildata:local"
	// WorkerServiceAccount is the worker pods' account, as config/default
	// names it.
	WorkerServiceAccount = "emaildata-worker"
	// NodeName is the local node that runs the pods.
	NodeName = "local-node"
)

// startJobs starts the Job control plane and points the manager options at
// it: Jobs run in the operator's namespace, as in a cluster.
func startJobs(ctx context.Context, env *envtest.Environment, c client.Client, o Options, dir string, mopts *operator.Options) (*jobplane.Plane, error) {
	// make run passes "bin": relative to here, not to the pods' directories.
	workerDir, err := filepath.Abs(o.WorkerDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(workerDir, "worker")); err != nil {
		return nil, fmt.Errorf("the job executor needs the worker binary in %s (make run builds it into bin/): %w", workerDir, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: WorkerServiceAccount},
		AutomountServiceAccountToken: ptr.To(false)}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create worker service account: %w", err)
	}
	plane, err := jobplane.Start(ctx, jobplane.Options{
		Env: env, AssetsDir: o.AssetsDir, Dir: filepath.Join(dir, "jobs"), NodeName: NodeName,
		Images: map[string]string{WorkerImage: workerDir},
		Log:    o.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("start the job control plane: %w", err)
	}
	// The workers get the manager's default memory limit, which the test
	// node enforces as a kubelet does (a worker over it ends OOMKilled).
	res, err := operator.WorkerResources("100m", operator.DefaultWorkerMemory, "")
	if err != nil {
		return nil, err
	}
	mopts.Executor = operator.ExecutorJob
	mopts.Job = controllers.JobConfig{
		Namespace:          Namespace,
		Image:              WorkerImage,
		ServiceAccountName: WorkerServiceAccount,
		Resources:          res,
	}
	// Should a URL give the workers a history, the manager hands them
	// make run's history key from its installation secret (historyKey).
	if o.Store == StoreS3 {
		// The workers get the store's credentials from the Secret, not
		// from this process: the test node gives a pod only its own env.
		mopts.Job.EnvFromSecret = StoreSecret
	}
	return plane, nil
}
