package main

// What HAMi's NVIDIA plugin asks of and writes to the API server around Allocate: the pod being bound to this node,
// the pod's annotations, the node's HAMi lock. Each function follows the named HAMi function of the release the
// plugin speaks; where the two releases differ, both ways are here, chosen by version.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// hamiAPI talks to the API server as HAMi's plugin of one release does.
type hamiAPI struct {
	version string
	node    string
	client  kubernetes.Interface
	// backoff of ReleaseNodeLock's retries (pkg/util/nodelock/nodelock.go DefaultStrategy): 5 steps from 100 ms,
	// factor 1.0 and jitter 0.1 at v2.8.3, factor 2.0 and jitter 0.5 at v2.10.0.
	backoff wait.Backoff
}

func newHamiAPI(version, node string, client kubernetes.Interface) *hamiAPI {
	backoff := wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 2.0, Jitter: 0.5}
	if version == V283 {
		backoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 1.0, Jitter: 0.1}
	}
	return &hamiAPI{version: version, node: node, client: client, backoff: backoff}
}

// pendingPod is the pod whose devices the kubelet is allocating (pkg/util/util.go GetPendingPod, both tags): first
// the pod named by the node's lock, whatever its state (GetAllocatePodByNode); without a lock, or with a lock of
// the old timestamp-only form, the first pod of the node (in the API server's list order) that is Pending, carries
// hami.io/bind-time, names this node in hami.io/vgpu-node and whose hami.io/bind-phase is "allocating" (v2.8.3) or
// "allocating" or "success" (v2.10.0, for a container allocated after its pod's others).
func (h *hamiAPI) pendingPod(ctx context.Context) (*corev1.Pod, error) {
	node, err := h.client.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if value, ok := node.Annotations[annoNodeLock]; ok {
		_, namespace, name, err := parseNodeLock(value)
		if err != nil {
			return nil, err
		}
		if namespace != "" && name != "" {
			return h.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		}
	}
	pods, err := h.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + h.node})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != h.node { // what the field selector keeps (a fake clientset does not apply it)
			continue
		}
		if pod.Status.Phase != corev1.PodPending {
			continue
		}
		if _, ok := pod.Annotations[annoBindTime]; !ok {
			continue
		}
		phase, ok := pod.Annotations[annoBindPhase]
		if !ok || !(phase == phaseAllocating || (h.version == V2100 && phase == phaseSuccess)) {
			continue
		}
		if pod.Annotations[annoVGPUNode] == h.node {
			return pod, nil
		}
	}
	return nil, fmt.Errorf("no binding pod found on node %s", h.node)
}

// parseNodeLock reads hami.io/mutex.lock: "<RFC 3339 time>,<namespace>,<name>", or the old form, a time alone
// (pkg/util/nodelock/nodelock.go ParseNodeLock, both tags).
func parseNodeLock(value string) (time.Time, string, string, error) {
	if !strings.Contains(value, nodeLockSep) {
		at, err := time.Parse(time.RFC3339, value)
		return at, "", "", err
	}
	parts := strings.Split(value, nodeLockSep)
	if len(parts) != 3 {
		return time.Time{}, "", "", fmt.Errorf("malformed lock annotation: expected 3 parts, got %d from %s", len(parts), value)
	}
	at, err := time.Parse(time.RFC3339, parts[0])
	return at, parts[1], parts[2], err
}

// patchPodAnnotations merges annotations into the pod (pkg/util/util.go PatchPodAnnotations: a JSON merge patch of
// metadata.annotations; it adds a label only for hami.io/vgpu-node, which the plugin never writes).
func (h *hamiAPI) patchPodAnnotations(ctx context.Context, pod *corev1.Pod, annotations map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = h.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		klog.ErrorS(err, "patching the pod's annotations", "pod", klog.KObj(pod))
	}
	return err
}

// allocationTrySuccess calls the pod's allocation done once its to-allocate annotation, read again from the API
// server, names no device type any more (plugin/util.go PodAllocationTrySuccess, both tags); a pod that cannot be
// read is left as it is.
func (h *hamiAPI) allocationTrySuccess(ctx context.Context, pod *corev1.Pod) {
	refreshed, err := h.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		klog.ErrorS(err, "reading the pod again", "pod", klog.KObj(pod))
		return
	}
	left := refreshed.Annotations[annoToAllocate]
	for _, word := range vendorWords[h.version] {
		if strings.Contains(left, word) {
			klog.InfoS("devices of the pod are still to allocate", "pod", klog.KObj(pod), "left", left)
			return
		}
	}
	klog.InfoS("all devices of the pod allocated: releasing the node lock", "pod", klog.KObj(pod))
	h.finish(ctx, pod, phaseSuccess)
}

// allocationFailed marks the pod failed and releases the node's lock (plugin/util.go PodAllocationFailed).
func (h *hamiAPI) allocationFailed(ctx context.Context, pod *corev1.Pod) {
	klog.InfoS("allocation failed", "pod", klog.KObj(pod), "node", h.node)
	h.finish(ctx, pod, phaseFailed)
}

// finish writes hami.io/bind-phase and releases the lock (plugin/util.go updatePodAnnotationsAndReleaseLock): at
// v2.8.3 a failed patch of the pod keeps the lock (it returns first); v2.10.0 releases it all the same.
func (h *hamiAPI) finish(ctx context.Context, pod *corev1.Pod, phase string) {
	if err := h.patchPodAnnotations(ctx, pod, map[string]string{annoBindPhase: phase}); err != nil && h.version == V283 {
		return
	}
	if err := h.releaseNodeLock(ctx, pod); err != nil {
		klog.ErrorS(err, "releasing the node lock", "node", h.node, "lock", annoNodeLock)
	}
}

// releaseNodeLock removes hami.io/mutex.lock if this pod holds it (pkg/util/nodelock/nodelock.go ReleaseNodeLock
// with the owner check, as the plugin calls it), with a merge patch that carries the node's resourceVersion,
// retried on any error with the release's backoff.
//
// v2.8.3 releases only a lock ending in ",<namespace>,<name>" of the pod (so never one of the old timestamp-only
// form) and, once past that check, deletes whatever lock the node then holds. v2.10.0 also releases a
// timestamp-only lock, and checks again before each patch: a lock gone meanwhile is left gone, a lock that changed
// hands (or a timestamp-only lock restamped) is left alone.
func (h *hamiAPI) releaseNodeLock(ctx context.Context, pod *corev1.Pod) error {
	node, err := h.client.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	first, ok := node.Annotations[annoNodeLock]
	if !ok {
		return nil
	}
	owner := nodeLockSep + pod.Namespace + nodeLockSep + pod.Name
	owned := strings.HasSuffix(first, owner)
	if !owned && (h.version == V283 || strings.Contains(first, nodeLockSep)) {
		klog.InfoS("the node lock is not this pod's", "lock", first, "pod", klog.KObj(pod))
		return nil
	}
	released := false
	err = retry.OnError(h.backoff, func(error) bool { return true }, func() error {
		node, err := h.client.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.version == V2100 {
			current, ok := node.Annotations[annoNodeLock]
			if !ok {
				return nil
			}
			if (!strings.Contains(current, nodeLockSep) && current != first) ||
				(strings.Contains(current, nodeLockSep) && !strings.HasSuffix(current, owner)) {
				return nil
			}
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null},"resourceVersion":%q}}`, annoNodeLock, node.ResourceVersion)
		_, err = h.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			return err
		}
		released = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to release node lock (node=%s): %w", h.node, err)
	}
	if released {
		klog.InfoS("node lock released", "node", h.node, "pod", klog.KObj(pod))
	}
	return nil
}
