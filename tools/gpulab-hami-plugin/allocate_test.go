package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const testUUID = "6f1c2a0e-8a7b-4c1d-9e2f-0123456789ab"

// container is one container of a test pod: its name and its limits as the API server returns them (canonical
// quantities: 3000 MB of nvidia.com/gpumem comes back as "3k").
type container struct {
	name   string
	limits map[string]string
}

// boundPod is a pod as HAMi's scheduler leaves it after Filter and Bind (pkg/scheduler/scheduler.go at both tags:
// hami.io/vgpu-node and vgpu-time, the to-allocate and allocated devices, then bind-phase "allocating" and
// bind-time as Unix seconds), bound to the node and still Pending, read back from the API server as JSON.
func boundPod(t *testing.T, name, toAllocate, phase string, inits, containers []container) *corev1.Pod {
	t.Helper()
	annotations := map[string]string{
		annoVGPUNode:        testNode,
		"hami.io/vgpu-time": "1785564000",
		annoToAllocate:      toAllocate,
		annoAllocated:       toAllocate,
		annoBindPhase:       phase,
		annoBindTime:        "1785564001",
	}
	spec := func(list []container) []map[string]any {
		out := []map[string]any{}
		for _, c := range list {
			out = append(out, map[string]any{"name": c.name, "image": "cuda:12", "resources": map[string]any{"limits": c.limits}})
		}
		return out
	}
	text, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "annotations": annotations},
		"spec": map[string]any{"nodeName": testNode, "schedulerName": "hami-scheduler", "initContainers": spec(inits),
			"containers": spec(containers)},
		"status": map[string]any{"phase": "Pending"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return apiPod(t, string(text))
}

func gpuLimits(gpus, memory, cores string) map[string]string {
	return map[string]string{ResourceGPU: gpus, ResourceGPUMem: memory, ResourceGPUCores: cores}
}

func newGPUPlugin(t *testing.T, version string, client *fake.Clientset) *gpuPlugin {
	t.Helper()
	return &gpuPlugin{version: version, api: newHamiAPI(version, testNode, client), devices: gpuDevices(testCards(t)),
		hookPath: DefaultHookPath, newUUID: func() string { return testUUID }}
}

// kubeletAllocate is the kubelet's call for one container (kubernetes v1.36.4 pkg/kubelet/cm/devicemanager/
// endpoint.go allocate: one ContainerAllocateRequest per call).
func kubeletAllocate(p *gpuPlugin, ids ...string) (*pluginapi.AllocateResponse, error) {
	return p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
}

// allocateEnv is the environment the kubelet gets for one container.
func allocateEnv(t *testing.T, p *gpuPlugin, ids ...string) map[string]string {
	t.Helper()
	response, err := kubeletAllocate(p, ids...)
	return envOf(t, response, err)
}

func envOf(t *testing.T, response *pluginapi.AllocateResponse, err error) map[string]string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(response.ContainerResponses) != 1 {
		t.Fatalf("%d container responses", len(response.ContainerResponses))
	}
	answer := response.ContainerResponses[0]
	if len(answer.Mounts) != 0 || len(answer.Devices) != 0 {
		t.Fatalf("mounts or devices answered: %+v", answer)
	}
	return answer.Envs
}

func hamiEnv(visible string, memory []string, cores string) map[string]string {
	env := map[string]string{
		envVisibleDevices: visible,
		envSMLimit:        cores,
		envSharedCache:    "/usr/local/vgpu/" + testUUID + ".cache",
		envLogLevel:       "1",
	}
	for i, m := range memory {
		env[fmt.Sprintf(envMemoryLimit, i)] = m
	}
	return env
}

func expectEnv(t *testing.T, got, want map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("env\n got %v\nwant %v", got, want)
	}
}

func expectPod(t *testing.T, client *fake.Clientset, name, toAllocate, phase string) {
	t.Helper()
	pod := getPod(t, client, "default", name)
	if pod.Annotations[annoToAllocate] != toAllocate || pod.Annotations[annoBindPhase] != phase {
		t.Fatalf("pod %s: to-allocate %q bind-phase %q, want %q %q", name, pod.Annotations[annoToAllocate],
			pod.Annotations[annoBindPhase], toAllocate, phase)
	}
}

func expectLock(t *testing.T, client *fake.Clientset, want string) {
	t.Helper()
	got, ok := getNode(t, client).Annotations[annoNodeLock]
	if want == "" && ok || want != "" && got != want {
		t.Fatalf("node lock %q (present %v), want %q", got, ok, want)
	}
}

// TestAllocateV2100TwoContainers stands for the kubelet's Allocate calls and the API server's pod and node objects
// as HAMi v2.10.0 leaves them: the pod of HAMi's own test (plugin/server_test.go
// TestAllocatePreservesContainerOrderWhenOneContainerFallsBack: "GPU-annotated-a,NVIDIA,3000,50:;GPU-annotated-b,
// NVIDIA,4000,60:;", containers c0 and c1, the kubelet's device GPU-03f69c50-207a-2038-9b45-23cac89cb67a-0), found
// through the node lock the scheduler holds for it. The kubelet asks for one container at a time; after the first,
// the second container's part is all that is left and the lock is kept; after the second the pod is "success" and
// the lock is gone.
func TestAllocateV2100TwoContainers(t *testing.T) {
	annotation := "GPU-annotated-a,NVIDIA,3000,50:;GPU-annotated-b,NVIDIA,4000,60:;"
	pod := boundPod(t, "test-pod", annotation, phaseAllocating, nil, []container{
		{"c0", gpuLimits("1", "3k", "50")}, {"c1", gpuLimits("1", "4k", "60")},
	})
	if q := pod.Spec.Containers[0].Resources.Limits[ResourceGPUMem]; q.Value() != 3000 || q.String() != "3k" {
		t.Fatalf("the API server's quantity: %s", q.String())
	}
	lock := lockOf("default", "test-pod")
	client := newClient(nodeWithLock(lock), pod)
	p := newGPUPlugin(t, V2100, client)

	expectEnv(t, allocateEnv(t, p, "GPU-03f69c50-207a-2038-9b45-23cac89cb67a-0"),
		hamiEnv("GPU-annotated-a", []string{"3000m"}, "50"))
	expectPod(t, client, "test-pod", ";GPU-annotated-b,NVIDIA,4000,60:;;", phaseAllocating)
	expectLock(t, client, lock)

	expectEnv(t, allocateEnv(t, p, "GPU-03f69c50-207a-2038-9b45-23cac89cb67b-1"),
		hamiEnv("GPU-annotated-b", []string{"4000m"}, "60"))
	// v2.10.0 keeps the empty part after the last ";" as a container of its own: each erasure adds a ";".
	expectPod(t, client, "test-pod", ";;;;", phaseSuccess)
	expectLock(t, client, "")
}

// TestAllocateV283TwoContainers: the same boundary as HAMi v2.8.3 leaves it, with the pod annotation of v2.8.3's
// pkg/device/devices_test.go ("GPU-8dcd427f-...,NVIDIA,500,3:;GPU-ebe7c3f7-...,NVIDIA,500,3:;"). v2.8.3 drops the
// empty parts when it decodes, so the erased annotation is shorter than v2.10.0's.
func TestAllocateV283TwoContainers(t *testing.T) {
	a, b := "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4"
	annotation := a + ",NVIDIA,500,3:;" + b + ",NVIDIA,500,3:;"
	pod := boundPod(t, "trainer", annotation, phaseAllocating, nil, []container{
		{"main", gpuLimits("1", "500", "3")}, {"sidecar", gpuLimits("1", "500", "3")},
	})
	lock := lockOf("default", "trainer")
	client := newClient(nodeWithLock(lock), pod)
	p := newGPUPlugin(t, V283, client)

	expectEnv(t, allocateEnv(t, p, a+"-0"), hamiEnv(a, []string{"500m"}, "3"))
	expectPod(t, client, "trainer", ";"+b+",NVIDIA,500,3:;", phaseAllocating)
	expectLock(t, client, lock)

	expectEnv(t, allocateEnv(t, p, b+"-3"), hamiEnv(b, []string{"500m"}, "3"))
	expectPod(t, client, "trainer", ";", phaseSuccess)
	expectLock(t, client, "")
}

// TestAllocateSeveralCardsOneContainer: one container of two card shares (HAMi v2.8.3 pkg/device/devices_test.go
// EncodeContainerDevices: "GPU-936619fc-...,NVIDIA,1000,10:GPU-ebe7c3f7-...,NVIDIA,3000,30:"): one memory limit per
// card, the SM limit of the first, both UUIDs visible.
func TestAllocateSeveralCardsOneContainer(t *testing.T) {
	a, b := "GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313", "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4"
	for _, version := range Versions {
		pod := boundPod(t, "multi", a+",NVIDIA,1000,10:"+b+",NVIDIA,3000,30:;", phaseAllocating, nil,
			[]container{{"main", gpuLimits("2", "4k", "40")}})
		client := newClient(nodeWithLock(lockOf("default", "multi")), pod)
		env := allocateEnv(t, newGPUPlugin(t, version, client), a+"-1", b+"-2")
		expectEnv(t, env, hamiEnv(a+","+b, []string{"1000m", "3000m"}, "10"))
		expectLock(t, client, "")
	}
}

// TestAllocateV2100InitContainer: HAMi v2.10.0 counts init containers first (plugin/util_test.go: "GPU-init1,
// NVIDIA,500,10:;;" for an init container with a GPU and a main container without; ";;GPU-main1,NVIDIA,2000,50:;"
// for two init containers without and a main container with).
func TestAllocateV2100InitContainer(t *testing.T) {
	cases := []struct {
		annotation, erased, memory string
		inits                      []container
	}{
		{"GPU-init1,NVIDIA,500,10:;;", ";;;", "500m", []container{{"init", gpuLimits("1", "500", "10")}}},
		{";;GPU-main1,NVIDIA,2000,50:;", ";;;;", "2000m", []container{{"init-a", nil}, {"init-b", nil}}},
	}
	for _, c := range cases {
		main := container{"main", nil}
		if len(c.inits) == 2 {
			main = container{"main", gpuLimits("1", "2k", "50")}
		}
		pod := boundPod(t, "init", c.annotation, phaseAllocating, c.inits, []container{main})
		client := newClient(nodeWithLock(lockOf("default", "init")), pod)
		env := allocateEnv(t, newGPUPlugin(t, V2100, client), "GPU-MOCK-tenant-b-0-0")
		if env[fmt.Sprintf(envMemoryLimit, 0)] != c.memory {
			t.Fatalf("%s: %v", c.annotation, env)
		}
		expectPod(t, client, "init", c.erased, phaseSuccess)
		expectLock(t, client, "")
	}
}

// TestTheWrongNumberOfDevicesFails: the kubelet asks for more devices than the scheduler chose. Both releases mark
// the pod "failed" and release the node lock ("device number not matched"), the annotation untouched.
func TestTheWrongNumberOfDevicesFails(t *testing.T) {
	for _, version := range Versions {
		annotation := "GPU-MOCK-tenant-b-0,NVIDIA,20000,30:;"
		pod := boundPod(t, "p", annotation, phaseAllocating, nil, []container{{"main", gpuLimits("1", "20k", "30")}})
		client := newClient(nodeWithLock(lockOf("default", "p")), pod)
		_, err := kubeletAllocate(newGPUPlugin(t, version, client), "GPU-MOCK-tenant-b-0-0", "GPU-MOCK-tenant-b-0-1")
		if err == nil || err.Error() != "device number not matched" {
			t.Fatalf("%s: %v", version, err)
		}
		expectPod(t, client, "p", annotation, phaseFailed)
		expectLock(t, client, "")
	}
}

// TestMalformedAnnotations: where the releases read the pod's annotation differently. A part of three fields fails
// both (v2.8.3 says "device request not found", having dropped the decoding error); a memory that is not a number
// fails v2.10.0 and is 0 MB at v2.8.3.
func TestMalformedAnnotations(t *testing.T) {
	cases := []struct {
		version, annotation, err, phase, memory string
	}{
		{V283, "GPU-x,NVIDIA,500:;", "device request not found", phaseFailed, ""},
		{V2100, "GPU-x,NVIDIA,500:;", "pod annotation format error", phaseFailed, ""},
		{V283, "GPU-x,NVIDIA,5OO,3:;", "", phaseSuccess, "0m"},
		{V2100, "GPU-x,NVIDIA,5OO,3:;", "invalid memory field", phaseFailed, ""},
	}
	for _, c := range cases {
		pod := boundPod(t, "bad", c.annotation, phaseAllocating, nil, []container{{"main", gpuLimits("1", "500", "3")}})
		client := newClient(nodeWithLock(lockOf("default", "bad")), pod)
		response, err := kubeletAllocate(newGPUPlugin(t, c.version, client), "GPU-x-0")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%s %q: %v", c.version, c.annotation, err)
			}
		} else if env := envOf(t, response, err); env[fmt.Sprintf(envMemoryLimit, 0)] != c.memory {
			t.Fatalf("%s %q: %v", c.version, c.annotation, env)
		}
		if got := getPod(t, client, "default", "bad").Annotations[annoBindPhase]; got != c.phase {
			t.Fatalf("%s %q: bind-phase %q", c.version, c.annotation, got)
		}
		expectLock(t, client, "")
	}
}

// TestThePendingPodWithoutALock stands for GetPendingPod's second way (pkg/util/util.go at both tags): with no
// lock on the node, the pod is found by its annotations. A pod whose bind-phase is "success" with a container
// still to allocate is found by v2.10.0 only; v2.8.3 finds no pod, and answers the kubelet an error without
// touching any object.
func TestThePendingPodWithoutALock(t *testing.T) {
	annotation := ";GPU-MOCK-tenant-b-1,NVIDIA,8000,25:;"
	for _, version := range Versions {
		other := boundPod(t, "elsewhere", annotation, phaseAllocating, nil, []container{{"main", nil}})
		other.Annotations[annoVGPUNode] = "another-node"
		pod := boundPod(t, "half-done", annotation, phaseSuccess, nil, []container{{"a", nil}, {"b", gpuLimits("1", "8k", "25")}})
		client := newClient(nodeWithLock(""), other, pod)
		response, err := kubeletAllocate(newGPUPlugin(t, version, client), "GPU-MOCK-tenant-b-1-4")
		if version == V283 {
			if err == nil || err.Error() != "no binding pod found on node "+testNode {
				t.Fatalf("v2.8.3: %v", err)
			}
			expectPod(t, client, "half-done", annotation, phaseSuccess)
			continue
		}
		expectEnv(t, envOf(t, response, err), hamiEnv("GPU-MOCK-tenant-b-1", []string{"8000m"}, "25"))
		expectPod(t, client, "half-done", ";;;", phaseSuccess)
		expectPod(t, client, "elsewhere", annotation, phaseAllocating)
	}
}

// TestALockOfTheOldFormOrOfAnotherPod stands for pkg/util/nodelock ReleaseNodeLock as each release's plugin calls
// it. A lock of the old timestamp-only form ("2026-08-01T06:00:00Z") names no pod, so the pod is found by its
// annotations; v2.10.0 releases such a lock, v2.8.3 keeps it. A lock naming another pod is kept by both.
func TestALockOfTheOldFormOrOfAnotherPod(t *testing.T) {
	for _, version := range Versions {
		old := "2026-08-01T06:00:00Z"
		pod := boundPod(t, "p", "GPU-MOCK-tenant-b-0,NVIDIA,1000,10:;", phaseAllocating, nil, []container{{"m", nil}})
		client := newClient(nodeWithLock(old), pod)
		allocateEnv(t, newGPUPlugin(t, version, client), "GPU-MOCK-tenant-b-0-0")
		expectPod(t, client, "p", map[string]string{V283: ";", V2100: ";;"}[version], phaseSuccess)
		if version == V283 {
			expectLock(t, client, old)
		} else {
			expectLock(t, client, "")
		}
	}
	for _, version := range Versions {
		pod := boundPod(t, "p", "GPU-MOCK-tenant-b-0,NVIDIA,1000,10:;", phaseAllocating, nil, []container{{"m", nil}})
		holder := boundPod(t, "holder", "", phaseAllocating, nil, []container{{"m", nil}})
		api := newHamiAPI(version, testNode, newClient(nodeWithLock(lockOf("default", "holder")), pod, holder))
		lock := getNode(t, api.client.(*fake.Clientset)).Annotations[annoNodeLock]
		api.allocationFailed(context.Background(), pod)
		expectLock(t, api.client.(*fake.Clientset), lock)
		expectPod(t, api.client.(*fake.Clientset), "p", "GPU-MOCK-tenant-b-0,NVIDIA,1000,10:;", phaseFailed)
	}
}

// TestNoPendingPod: the kubelet asks while no pod is being bound here: an error, and nothing written.
func TestNoPendingPod(t *testing.T) {
	for _, version := range Versions {
		client := newClient(nodeWithLock(""))
		_, err := kubeletAllocate(newGPUPlugin(t, version, client), "GPU-MOCK-tenant-b-0-0")
		if err == nil || !strings.Contains(err.Error(), "no binding pod found") {
			t.Fatalf("%s: %v", version, err)
		}
		for _, action := range client.Actions() {
			if action.GetVerb() == "patch" {
				t.Fatalf("%s: %v", version, action)
			}
		}
	}
}

// TestAMIGDeviceIsUnknown: a request for a MIG device, which HAMi's plugin answers from its MIG devices; this plugin
// has none, so the device is unknown, as in HAMi, and the pod fails.
func TestAMIGDeviceIsUnknown(t *testing.T) {
	pod := boundPod(t, "mig", "MIG-aaa,NVIDIA,3000,50:;", phaseAllocating, nil, []container{{"m", nil}})
	client := newClient(nodeWithLock(lockOf("default", "mig")), pod)
	_, err := kubeletAllocate(newGPUPlugin(t, V2100, client), "MIG-aaa")
	if err == nil || !strings.Contains(err.Error(), "unknown device: MIG-aaa") {
		t.Fatal(err)
	}
	expectPod(t, client, "mig", "MIG-aaa,NVIDIA,3000,50:;", phaseFailed)
	expectLock(t, client, "")
}

// TestCountedResourcesAllocateNothing: nvidia.com/gpumem and nvidia.com/gpucores answer an empty response per
// container (mock-device-plugin internal/pkg/mock/server.go Allocate) and touch no object.
func TestCountedResourcesAllocateNothing(t *testing.T) {
	p := &countedPlugin{devices: gpumemDevices(testCards(t), 2)}
	response, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"mock-devices-id-0", "mock-devices-id-1"}}, {DevicesIds: []string{"mock-devices-id-7"}},
	}})
	if err != nil || len(response.ContainerResponses) != 2 || len(response.ContainerResponses[0].Envs) != 0 {
		t.Fatalf("%v %+v", err, response)
	}
}

// TestPreferredAllocation stands for the kubelet's GetPreferredAllocation call: v2.10.0 prefers a virtual device of
// the card the scheduler chose (plugin/server_test.go TestSelectPreferredDeviceIDsFromAnnotatedDevices) when the
// card id has an NVIDIA UUID's shape; for gpulab's ids it, like HAMi, finds no card and prefers nothing; v2.8.3
// never prefers.
func TestPreferredAllocation(t *testing.T) {
	card := "GPU-03f69c50-207a-2038-9b45-23cac89cb67a"
	ask := func(p *gpuPlugin, available ...string) [][]string {
		response, err := p.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: available, AllocationSize: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids [][]string
		for _, c := range response.ContainerResponses {
			ids = append(ids, c.DeviceIDs)
		}
		return ids
	}
	pod := boundPod(t, "p", card+",NVIDIA,3000,50:;", phaseAllocating, nil, []container{{"m", nil}})
	client := newClient(nodeWithLock(lockOf("default", "p")), pod)
	got := ask(newGPUPlugin(t, V2100, client), "GPU-aaaaaaaa-207a-2038-9b45-23cac89cb67a-0", card+"-3", card+"-4")
	if !reflect.DeepEqual(got, [][]string{{card + "-3"}}) {
		t.Fatalf("v2.10.0: %v", got)
	}
	if got := ask(newGPUPlugin(t, V283, client), card+"-3"); got != nil {
		t.Fatalf("v2.8.3: %v", got)
	}
	ours := boundPod(t, "q", "GPU-MOCK-tenant-b-1,NVIDIA,3000,50:;", phaseAllocating, nil, []container{{"m", nil}})
	client = newClient(nodeWithLock(lockOf("default", "q")), ours)
	if got := ask(newGPUPlugin(t, V2100, client), "GPU-MOCK-tenant-b-0-0", "GPU-MOCK-tenant-b-1-0"); got != nil {
		t.Fatalf("gpulab's ids: %v", got)
	}
}
