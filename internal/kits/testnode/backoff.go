package testnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// failedStart remembers a pod whose container could not start, for the
// backoff before the next try.
type failedStart struct {
	key     string // namespace/name
	tries   int
	at      time.Time // of the last try
	next    time.Time // of the next one
	reason  string
	message string
}

// volumeRetry is the first wait before a volume that could not be set up
// is tried again, doubling up to maxVolumeRetry (the kubelet's
// exponential backoff of volume operations: 500ms to 2m2s).
const (
	volumeRetry    = 500 * time.Millisecond
	maxVolumeRetry = 122 * time.Second
)

// pullErrorShown is how long ErrImagePull stays in a pod's status before
// ImagePullBackOff replaces it, as the kubelet's next sync does.
const pullErrorShown = 2 * time.Second

// startFailed records a failed try and returns how long until the pod is
// looked at again.
func (n *Node) startFailed(uid types.UID, key, reason, message string) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.starts[uid]
	if f == nil {
		f = &failedStart{key: key}
		n.starts[uid] = f
	}
	wait := n.cfg.StartBackoff << min(f.tries, 16)
	if wait > n.cfg.MaxStartBackoff || wait <= 0 {
		wait = n.cfg.MaxStartBackoff
	}
	if reason == reasonContainerCreating {
		// The kubelet's volume manager tries a mount again on its own
		// backoff, from half a second (a ConfigMap made just after its
		// pod is found within it).
		wait = min(volumeRetry<<min(f.tries, 8), maxVolumeRetry)
	}
	now := time.Now()
	f.tries++
	f.at, f.next, f.reason, f.message = now, now.Add(wait), reason, message
	if reason == reasonErrImagePull {
		return f.shownUntil().Sub(now)
	}
	return wait
}

// shownUntil is when ImagePullBackOff replaces ErrImagePull: after
// pullErrorShown, or half the backoff when that is shorter.
func (f *failedStart) shownUntil() time.Time {
	return f.at.Add(min(pullErrorShown, f.next.Sub(f.at)/2))
}

// backingOff returns the last failed try of a pod still in its backoff.
func (n *Node) backingOff(uid types.UID) (failedStart, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.starts[uid]
	if f == nil || !time.Now().Before(f.next) {
		return failedStart{}, false
	}
	return *f, true
}

func (n *Node) forgetStart(uid types.UID) {
	n.mu.Lock()
	delete(n.starts, uid)
	n.mu.Unlock()
}

// Waiting reasons the kubelet reports for containers that cannot start.
const (
	reasonErrImagePull         = "ErrImagePull"
	reasonImagePullBackOff     = "ImagePullBackOff"
	reasonCreateContainerError = "CreateContainerError"
	reasonCreateConfigError    = "CreateContainerConfigError"
)

// inBackoff reports a pod between two tries, and looks at it again when
// the backoff ends: a failed pull shows ErrImagePull for pullErrorShown,
// then ImagePullBackOff; other reasons stay as the last try left them.
func (n *Node) inBackoff(ctx context.Context, pod *corev1.Pod, key string, f failedStart) error {
	now := time.Now()
	if f.reason != reasonErrImagePull {
		n.queue.AddAfter(key, f.next.Sub(now))
		return nil
	}
	if shown := f.shownUntil(); now.Before(shown) {
		n.queue.AddAfter(key, shown.Sub(now))
		return nil
	}
	n.queue.AddAfter(key, f.next.Sub(now))
	image := pod.Spec.Containers[0].Image
	return n.waiting(ctx, pod, reasonImagePullBackOff, fmt.Sprintf("Back-off pulling image %q: %s: %s", image, reasonErrImagePull, f.message))
}
