package main

// The node's register annotation, written as HAMi's plugin writes it (plugin/register.go WatchAndRegister and
// RegisterInAnnotation, the same at v2.8.3 and v2.10.0), except when it starts: HAMi's starts once the nvidia.com/gpu
// plugin is registered with the kubelet, this one once every resource's first device list was sent to the kubelet
// (plugin.go start). It reads the node, patches hami.io/node-nvidia-register when the encoded cards differ from what it
// last wrote, then looks again after 30 s, or after 5 s when reading or patching failed. A plugin started anew (a
// kubelet restart restarts the plugins) has written nothing yet, so it patches again.
//
// Not written, at either tag: hami.io/node-handshake. HAMi's NVIDIA plugin neither writes nor answers it; only the
// scheduler does. At v2.10.0 the scheduler stamps "Requesting_<time>" (pkg/device/devices.go CheckHealth) and calls
// the node unhealthy once that stamp is over 60 s old only when the node's allocatable nvidia.com/gpu is 0, which a
// registered plugin keeps above 0; at v2.8.3 its NVIDIA CheckHealth looks at that allocatable alone, and the
// handshake is written only by NodeCleanUp ("Deleted_<time>"). Nor hami.io/node-nvidia-score, which HAMi writes from
// NVML's topology only with ENABLE_TOPOLOGY_SCORE=true (the chart sets it for the topology-aware policy only).

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The periods of WatchAndRegister (both tags).
const (
	registerPeriod     = 30 * time.Second
	registerRetryAfter = 5 * time.Second
)

type registrar struct {
	node       string
	client     kubernetes.Interface
	annotation string // the encoded cards (RegisterAnnotation)
	written    string // what this registrar last patched (HAMi's deviceCache)
	period     time.Duration
	retry      time.Duration
}

// once patches the annotation unless this registrar already wrote it; it says whether it patched.
//
// HAMi records the value as written before its patch, so a failed patch is not tried again while the devices stay
// the same; here it is recorded after a successful patch only, so the retry 5 s later patches again.
func (r *registrar) once(ctx context.Context) (bool, error) {
	if _, err := r.client.CoreV1().Nodes().Get(ctx, r.node, metav1.GetOptions{}); err != nil {
		return false, err
	}
	if r.annotation == r.written {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		annoRegister: r.annotation,
	}}})
	if err != nil {
		return false, err
	}
	if _, err := r.client.CoreV1().Nodes().Patch(ctx, r.node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, err
	}
	r.written = r.annotation
	return true, nil
}

// run patches until ctx ends.
func (r *registrar) run(ctx context.Context) {
	for {
		wait := r.period
		changed, err := r.once(ctx)
		switch {
		case err != nil:
			klog.ErrorS(err, "registering the node's cards in its annotation", "annotation", annoRegister)
			wait = r.retry
		case changed:
			klog.InfoS("registered the node's cards", "node", r.node, "annotation", annoRegister, "value", r.annotation)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
