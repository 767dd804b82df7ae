package main

// Allocate of nvidia.com/gpu as HAMi's NVIDIA plugin does it (pkg/device-plugin/nvidiadevice/nvinternal/plugin/
// server.go Allocate and plugin/util.go at v2.8.3 and v2.10.0), for hami-core mode and the chart's defaults
// (deviceListStrategy envvar, deviceIDStrategy uuid, deviceMemoryScaling 1, disablecorelimit false,
// libCudaLogLevel 1, HOOK_PATH /usr/local):
//
//   - the pod: the pending pod of this node (kube.go pendingPod);
//   - the container: the first whose part of hami.io/vgpu-devices-to-allocate is not empty yet;
//   - the answer: its environment for HAMi-core, from the annotation (not from the device IDs the kubelet chose);
//   - the pod: that part erased, then hami.io/bind-phase "success" and the node lock released once no part is
//     left, or "failed" and the lock released on an error after the pod was found.
//
// Left out, since no GPU and no HAMi-core library are on the node: the mounts (libvgpu.so, the container's cache
// folder <HOOK_PATH>/vgpu/containers/<pod uid>_<container>, /tmp/vgpulock, /etc/ld.so.preload unless
// CUDA_DISABLE_CONTROL=true, the license and vgpuvalidator) and the host folders HAMi creates for them; device
// specs (/dev/nvidia*, passDeviceSpecs) and CDI answers (deviceListStrategy cdi-*), off in the chart; the settings
// that are off by default (CUDA_OVERSUBSCRIBE for deviceMemoryScaling > 1, GPU_CORE_UTILIZATION_POLICY=disable for
// disablecorelimit, NVIDIA_GDRCOPY/GDS/MOFED, IMEX channels); MIG mode (a MIG device ID is unknown here, as an ID
// not among the plugin's devices is to HAMi: config.go refuses card ids holding "MIG").

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The environment HAMi-core reads, and the list of visible devices (plugin/server.go, deviceListEnvVar).
const (
	envVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	envMemoryLimit    = "CUDA_DEVICE_MEMORY_LIMIT_%d"
	envSMLimit        = "CUDA_DEVICE_SM_LIMIT"
	envSharedCache    = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
	envLogLevel       = "LIBCUDA_LOG_LEVEL"
	// chartLogLevel is the chart's devices.nvidia.libCudaLogLevel (charts/hami/values.yaml, 1 at both tags), which
	// the device config hands the plugin as libCudaLogLevel.
	chartLogLevel = "1"
	// DefaultHookPath is the chart's global.gpuHookPath, the plugin's HOOK_PATH (both tags).
	DefaultHookPath = "/usr/local"
)

// gpuPlugin serves nvidia.com/gpu.
type gpuPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	version  string
	api      *hamiAPI
	devices  []*pluginapi.Device
	hookPath string
	newUUID  func() string
	stop     <-chan struct{}
	listed   *listSent
	// mu serialises Allocate, as v2.10.0's plugin.applyMutex does; v2.8.3 takes no lock, and needs none with a
	// kubelet that admits one container at a time, so both are serialised here.
	mu sync.Mutex
}

// GetDevicePluginOptions: v2.10.0 answers GetPreferredAllocationAvailable true, v2.8.3 false (plugin/server.go).
// The kubelet v1.36.4 asks this, not the options of the registration, when a plugin connects (pkg/kubelet/cm/
// devicemanager/manager.go).
func (p *gpuPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: p.version == V2100}, nil
}

// ListAndWatch sends the devices once; none of them ever turns unhealthy (no NVML events to watch).
func (p *gpuPlugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	return listAndWatch(p.devices, p.stop, p.listed, stream)
}

// PreStartContainer is not asked for (the registration does not request it).
func (p *gpuPlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// GetPreferredAllocation: v2.8.3 prefers nothing. v2.10.0 prefers, for each container request, virtual devices of
// the cards the scheduler chose for the first container not yet allocated (plugin/server.go GetPreferredAllocation
// and selectPreferredDeviceIDsFromAnnotatedDevices); a request it cannot match gets no answer, and the kubelet then
// chooses alone.
func (p *gpuPlugin) GetPreferredAllocation(ctx context.Context, request *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	response := &pluginapi.PreferredAllocationResponse{}
	if p.version != V2100 {
		return response, nil
	}
	var pending [][]containerDevice
	if pod, err := p.api.pendingPod(ctx); err == nil {
		if devices, err := decodePodDevices(V2100, pod.Annotations); err == nil {
			for _, container := range devices {
				if len(container) > 0 {
					pending = append(pending, container)
				}
			}
		}
	}
	for i, container := range request.ContainerRequests {
		if i >= len(pending) {
			continue
		}
		ids, err := preferredIDs(container.AvailableDeviceIDs, container.MustIncludeDeviceIDs, pending[i], int(container.AllocationSize))
		if err != nil {
			klog.InfoS("no preferred allocation", "err", err)
			continue
		}
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return response, nil
}

// preferredIDs picks, for each annotated card in order, an available virtual device of that card (v2.10.0
// selectPreferredDeviceIDsFromAnnotatedDevices): the must-include devices count for their cards first.
func preferredIDs(available, required []string, desired []containerDevice, size int) ([]string, error) {
	if len(desired) < size {
		return nil, fmt.Errorf("annotated devices %d smaller than requested allocation size %d", len(desired), size)
	}
	isRequired := map[string]bool{}
	requiredOf := map[string]int{}
	selected := make([]string, 0, size)
	for _, id := range required {
		isRequired[id] = true
		requiredOf[physicalID(id)]++
		selected = append(selected, id)
	}
	availableOf := map[string][]string{}
	for _, id := range available {
		if !isRequired[id] {
			availableOf[physicalID(id)] = append(availableOf[physicalID(id)], id)
		}
	}
	for _, device := range desired[:size] {
		card := physicalID(device.UUID)
		if requiredOf[card] > 0 {
			requiredOf[card]--
			continue
		}
		candidates := availableOf[card]
		if len(candidates) == 0 {
			return nil, fmt.Errorf("no available slice device found for annotated GPU %s", card)
		}
		selected = append(selected, candidates[0])
		availableOf[card] = candidates[1:]
	}
	if len(selected) != size {
		return nil, fmt.Errorf("preferred allocation selected %d devices, want %d", len(selected), size)
	}
	return selected, nil
}

// physicalID is the card of a virtual device ID (v2.10.0 plugin/server.go physicalDeviceID): the part before "::"
// of an annotated ID; else, for an ID of exactly six dashes (an NVIDIA UUID, five, and the "-<i>" of
// GetPluginDevices) ending in a number, the ID without that suffix; else the ID itself. So a card id that is not of
// a real UUID's shape (gpulab's GPU-MOCK-<tenant>-<i> has five dashes only when the tenant's name has two) is not
// recognised, and v2.10.0 then prefers nothing for it, as HAMi would.
func physicalID(id string) string {
	if before, _, found := strings.Cut(id, "::"); found {
		return before
	}
	if strings.Count(id, "-") == 6 {
		last := strings.LastIndex(id, "-")
		if last < len(id)-1 {
			if _, err := strconv.Atoi(id[last+1:]); err == nil {
				return id[:last]
			}
		}
	}
	return id
}

// Allocate answers the kubelet for the containers of the pending pod, as HAMi's plugin of the version does.
func (p *gpuPlugin) Allocate(ctx context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	klog.InfoS("Allocate", "request", request)
	pod, err := p.api.pendingPod(ctx)
	if err != nil {
		// No pod to mark, no lock released: the kubelet retries the admission (both tags).
		return &pluginapi.AllocateResponse{}, err
	}
	klog.InfoS("allocating for pod", "pod", klog.KObj(pod), "annotations", pod.Annotations)
	if p.version == V283 {
		return p.allocate283(ctx, pod, request)
	}
	return p.allocate2100(ctx, pod, request)
}

// allocate2100 is v2.10.0's Allocate: the annotation decoded once, the containers popped from it in order (init
// containers first), the erased annotation patched once after all of them (plugin/util.go popNextContainerDevices,
// patchErasedAnnotation).
func (p *gpuPlugin) allocate2100(ctx context.Context, pod *corev1.Pod, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	devices, err := decodePodDevices(V2100, pod.Annotations)
	if err != nil {
		p.api.allocationFailed(ctx, pod)
		return &pluginapi.AllocateResponse{}, err
	}
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		if err := p.checkMIG(container); err != nil {
			p.api.allocationFailed(ctx, pod)
			return nil, err
		}
		name, shares, err := popNext(pod, devices)
		if err != nil {
			p.api.allocationFailed(ctx, pod)
			return &pluginapi.AllocateResponse{}, err
		}
		if len(shares) != len(container.DevicesIds) {
			p.api.allocationFailed(ctx, pod)
			return &pluginapi.AllocateResponse{}, errors.New("device number not matched")
		}
		klog.InfoS("allocated", "pod", klog.KObj(pod), "container", name, "devices", shares)
		response.ContainerResponses = append(response.ContainerResponses, p.containerResponse(shares))
	}
	erased := encodePodDevices(devices)
	if err := p.api.patchPodAnnotations(ctx, pod, map[string]string{annoToAllocate: erased}); err != nil {
		p.api.allocationFailed(ctx, pod)
		return &pluginapi.AllocateResponse{}, err
	}
	pod.Annotations[annoToAllocate] = erased
	p.api.allocationTrySuccess(ctx, pod)
	return response, nil
}

// popNext takes the first container part that is not empty out of `devices` (leaving it empty) and names its
// container: positions count the init containers first, then the others (v2.10.0 popNextContainerDevices).
func popNext(pod *corev1.Pod, devices podDevices) (string, []containerDevice, error) {
	inits := len(pod.Spec.InitContainers)
	for i, shares := range devices {
		if len(shares) == 0 {
			continue
		}
		devices[i] = []containerDevice{}
		if i < inits {
			return pod.Spec.InitContainers[i].Name, shares, nil
		}
		if i-inits >= len(pod.Spec.Containers) {
			return "", nil, fmt.Errorf("container index %d out of range (init=%d, regular=%d)", i, inits, len(pod.Spec.Containers))
		}
		return pod.Spec.Containers[i-inits].Name, shares, nil
	}
	return "", nil, errors.New("no pending device allocation found")
}

// allocate283 is v2.8.3's Allocate: for each container the annotation is decoded again (empty parts dropped), the
// first part is the container's, and the annotation is patched with that part erased before the answer is made
// (plugin/util.go GetNextDeviceRequest, EraseNextDeviceTypeFromAnnotation). The pod is the one read at the start,
// so its annotation is the same for each container of one call; the kubelet asks for one container per call
// (kubernetes v1.36.4 pkg/kubelet/cm/devicemanager/endpoint.go allocate).
func (p *gpuPlugin) allocate283(ctx context.Context, pod *corev1.Pod, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		if err := p.checkMIG(container); err != nil {
			p.api.allocationFailed(ctx, pod)
			return nil, err
		}
		devices, err := decodePodDevices(V283, pod.Annotations)
		if err != nil {
			p.api.allocationFailed(ctx, pod)
			return &pluginapi.AllocateResponse{}, err
		}
		// The first part of the compacted list is always the next one; v2.8.3 names its container by that
		// position among the pod's containers, so always the first (init containers not counted).
		var shares []containerDevice
		for _, part := range devices {
			if len(part) > 0 {
				shares = part
				break
			}
		}
		if shares == nil || len(pod.Spec.Containers) == 0 {
			p.api.allocationFailed(ctx, pod)
			return &pluginapi.AllocateResponse{}, errDeviceRequestNotFound
		}
		if len(shares) != len(container.DevicesIds) {
			p.api.allocationFailed(ctx, pod)
			return &pluginapi.AllocateResponse{}, errors.New("device number not matched")
		}
		erased := podDevices{}
		found := false
		for _, part := range devices {
			if !found && len(part) > 0 {
				found = true
				part = []containerDevice{}
			}
			erased = append(erased, part)
		}
		if err := p.api.patchPodAnnotations(ctx, pod, map[string]string{annoToAllocate: encodePodDevices(erased)}); err != nil {
			p.api.allocationFailed(ctx, pod)
			return &pluginapi.AllocateResponse{}, err
		}
		klog.InfoS("allocated", "pod", klog.KObj(pod), "container", pod.Spec.Containers[0].Name, "devices", shares)
		response.ContainerResponses = append(response.ContainerResponses, p.containerResponse(shares))
	}
	p.api.allocationTrySuccess(ctx, pod)
	return response, nil
}

// checkMIG refuses a MIG device: HAMi takes a request whose first ID holds "MIG" for a MIG instance and refuses an
// ID that is not among its devices ("unknown device"); this plugin has none (config.go).
func (p *gpuPlugin) checkMIG(container *pluginapi.ContainerAllocateRequest) error {
	if len(container.DevicesIds) == 0 {
		return errors.New("a container request without devices")
	}
	if strings.Contains(container.DevicesIds[0], "MIG") {
		for _, id := range container.DevicesIds {
			if !p.known(id) {
				return fmt.Errorf("invalid allocation request for '%s': unknown device: %s", ResourceGPU, id)
			}
		}
	}
	return nil
}

func (p *gpuPlugin) known(id string) bool {
	for _, device := range p.devices {
		if device.ID == id {
			return true
		}
	}
	return false
}

// containerResponse is the environment of one container: the cards' UUIDs (unique, in the annotation's order), one
// memory limit per card in MB with HAMi-core's "m" suffix, the SM limit of the first card (HAMi-core applies one to
// all), a shared cache file named by a fresh UUID under HOOK_PATH, and the log level.
func (p *gpuPlugin) containerResponse(shares []containerDevice) *pluginapi.ContainerAllocateResponse {
	var ids []string
	seen := map[string]bool{}
	for _, share := range shares {
		if !seen[share.UUID] {
			seen[share.UUID] = true
			ids = append(ids, share.UUID)
		}
	}
	env := map[string]string{envVisibleDevices: strings.Join(ids, ",")}
	for i, share := range shares {
		env[fmt.Sprintf(envMemoryLimit, i)] = fmt.Sprintf("%dm", share.Usedmem)
	}
	env[envSMLimit] = strconv.Itoa(int(shares[0].Usedcores))
	env[envSharedCache] = fmt.Sprintf("%s/vgpu/%s.cache", p.hookPath, p.newUUID())
	env[envLogLevel] = chartLogLevel
	return &pluginapi.ContainerAllocateResponse{Envs: env}
}

// countedPlugin serves nvidia.com/gpumem or nvidia.com/gpucores as the upstream mock plugin does
// (mock-device-plugin internal/pkg/mock/server.go): default options, Allocate answering an empty response per
// container, no preference.
type countedPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	stop    <-chan struct{}
	listed  *listSent
}

func (p *countedPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *countedPlugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	return listAndWatch(p.devices, p.stop, p.listed, stream)
}

func (p *countedPlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *countedPlugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for range request.ContainerRequests {
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return response, nil
}

func (p *countedPlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// listAndWatch sends the list, marks it received (`listed`, which may be nil), and holds the stream open until the
// plugin stops or the kubelet goes.
func listAndWatch(devices []*pluginapi.Device, stop <-chan struct{}, listed *listSent, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
		return err
	}
	listed.mark()
	select {
	case <-stop:
	case <-stream.Context().Done():
	}
	return nil
}

func newUUID() string { return uuid.New().String() }

// listSent is closed once the kubelet has been sent a resource's device list: from then on its device manager
// holds the devices, and a pod's admission finds them (the kubelet's endpoint callback sets its healthy devices
// from each ListAndWatch answer: kubernetes v1.36.4 pkg/kubelet/cm/devicemanager/manager.go
// genericDeviceUpdateCallback). A registration alone is not that: until the first list, a pod bound to the node
// is refused at admission (UnexpectedAdmissionError), whatever the node's allocatable still shows of a former
// plugin.
type listSent struct {
	once sync.Once
	done chan struct{}
}

func newListSent() *listSent { return &listSent{done: make(chan struct{})} }

func (l *listSent) mark() {
	if l != nil {
		l.once.Do(func() { close(l.done) })
	}
}

// allListed waits until each list was sent (true) or ctx ends (false).
func allListed(ctx context.Context, lists []*listSent) bool {
	for _, list := range lists {
		select {
		case <-list.done:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
