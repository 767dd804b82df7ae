package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// devicesJSON is a devices file as gpulab writes it (model/dra.py node_devices: one A100 of 81920 MB), with the
// quantities as the API server writes them back ("81920" is whole, "20k" is 20000).
const devicesJSON = `{"driver": "gpu.gpulab.io", "node": "tenant-b-worker", "devices": [{
  "name": "gpu-0", "allowMultipleAllocations": true,
  "attributes": {"tenant": {"string": "tenant-b"}, "uuid": {"string": "GPU-MOCK-tenant-b-0"}, "type": {"string": "NVIDIA-A100-80GB"}},
  "capacity": {
    "memory": {"value": "81920", "requestPolicy": {"default": "81920"}},
    "cores": {"value": "100", "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": "100"}}}}}]}`

func writeDevices(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "devices.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newDriver(t *testing.T) *Driver {
	t.Helper()
	devices, err := ReadNodeDevices(writeDevices(t, devicesJSON))
	if err != nil {
		t.Fatal(err)
	}
	return &Driver{devices: devices, cdiDir: t.TempDir()}
}

// claim is an allocated claim as kube-scheduler leaves it with consumable capacity: one share of gpu-0.
func claim(uid string, consumed map[resourceapi.QualifiedName]resource.Quantity) *resourceapi.ResourceClaim {
	share := types.UID("share-" + uid)
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer-1-gpu", Namespace: "gpu-workloads", UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "gpu.gpulab.io", Pool: "tenant-b-worker", Device: "gpu-0",
				ShareID: &share, ConsumedCapacity: consumed,
			}}},
		}},
	}
}

func readSpec(t *testing.T, path string) cdiSpec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdiSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestPrepareWritesTheSharesCapacityAndUnprepareRemovesIt(t *testing.T) {
	d := newDriver(t)
	consumed := map[resourceapi.QualifiedName]resource.Quantity{
		"memory": resource.MustParse("20k"), // the API server's form of 20000
		"cores":  resource.MustParse("30"),
	}
	results, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("uid-1", consumed)})
	if err != nil {
		t.Fatal(err)
	}
	result := results["uid-1"]
	if result.Err != nil {
		t.Fatal(result.Err)
	}
	share := types.UID("share-uid-1")
	want := []kubeletplugin.Device{{
		Requests: []string{"gpu"}, PoolName: "tenant-b-worker", DeviceName: "gpu-0",
		CDIDeviceIDs: []string{"gpu.gpulab.io/gpu=claim-uid-1-0"}, ShareID: &share,
	}}
	if !reflect.DeepEqual(result.Devices, want) {
		t.Fatalf("devices %+v, want %+v", result.Devices, want)
	}
	spec := readSpec(t, d.specPath("uid-1"))
	env := []string{"GPULAB_GPU_CORES=30", "GPULAB_GPU_DEVICE=gpu-0", "GPULAB_GPU_MEMORY_MB=20000", "GPULAB_GPU_UUID=GPU-MOCK-tenant-b-0"}
	if spec.Kind != "gpu.gpulab.io/gpu" || len(spec.Devices) != 1 || spec.Devices[0].Name != "claim-uid-1-0" ||
		!reflect.DeepEqual(spec.Devices[0].ContainerEdits.Env, env) {
		t.Fatalf("CDI spec %+v", spec)
	}
	// Idempotent: the kubelet asks again after a restart.
	if again, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("uid-1", consumed)}); again["uid-1"].Err != nil {
		t.Fatal(again["uid-1"].Err)
	}
	object := kubeletplugin.NamespacedObject{UID: "uid-1"}
	for range 2 { // a claim already undone is no error
		undone, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{object})
		if err != nil || undone["uid-1"] != nil {
			t.Fatalf("unprepare: %v %v", err, undone["uid-1"])
		}
	}
	if _, err := os.Stat(d.specPath("uid-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the CDI spec is still there: %v", err)
	}
}

func TestAShareWithoutConsumedCapacityGetsTheDevicesDefaults(t *testing.T) {
	d := newDriver(t)
	results, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("uid-2", nil)})
	if results["uid-2"].Err != nil {
		t.Fatal(results["uid-2"].Err)
	}
	env := readSpec(t, d.specPath("uid-2")).Devices[0].ContainerEdits.Env
	if !reflect.DeepEqual(env[:1], []string{"GPULAB_GPU_CORES=0"}) || env[2] != "GPULAB_GPU_MEMORY_MB=81920" {
		t.Fatalf("env %v", env)
	}
}

func TestAClaimThisNodeCannotHoldIsRefusedAndWritesNothing(t *testing.T) {
	for name, change := range map[string]func(*resourceapi.ResourceClaim){
		"not allocated":  func(c *resourceapi.ResourceClaim) { c.Status.Allocation = nil },
		"another pool":   func(c *resourceapi.ResourceClaim) { c.Status.Allocation.Devices.Results[0].Pool = "tenant-a-worker" },
		"no such device": func(c *resourceapi.ResourceClaim) { c.Status.Allocation.Devices.Results[0].Device = "gpu-7" },
		"fraction of a MB": func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation.Devices.Results[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("0.5")}
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t)
			c := claim("uid-3", nil)
			change(c)
			results, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
			if err != nil || results["uid-3"].Err == nil {
				t.Fatalf("want a per-claim error, got %v / %+v", err, results["uid-3"])
			}
			if _, err := os.Stat(d.specPath("uid-3")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused claim left a CDI spec: %v", err)
			}
		})
	}
}

func TestAnotherDriversResultIsLeftToIt(t *testing.T) {
	d := newDriver(t)
	c := claim("uid-4", nil)
	c.Status.Allocation.Devices.Results[0].Driver = "gpu.nvidia.com"
	results, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if results["uid-4"].Err != nil || len(results["uid-4"].Devices) != 0 {
		t.Fatalf("%+v", results["uid-4"])
	}
}

func TestABadDevicesFileIsRefusedWithWhatIsWrong(t *testing.T) {
	for text, want := range map[string]string{
		`{"driver": "gpu.gpulab.io", "node": "n", "devices": []}`:                                                   "at least one device",
		strings.Replace(devicesJSON, `"memory": {"value": "81920", "requestPolicy": {"default": "81920"}},`, "", 1): `no "memory" capacity`,
		strings.Replace(devicesJSON, `"node"`, `"nodes"`, 1):                                                        "unknown field",
	} {
		_, err := ReadNodeDevices(writeDevices(t, text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error with %q, got %v", want, err)
		}
	}
}

func TestTheNodesOnePoolIsPublishedWithItsDevices(t *testing.T) {
	d := newDriver(t)
	pools := d.devices.Resources().Pools
	slices := pools["tenant-b-worker"].Slices
	if len(pools) != 1 || len(slices) != 1 || len(slices[0].Devices) != 1 || slices[0].Devices[0].Name != "gpu-0" {
		t.Fatalf("%+v", pools)
	}
	if value := slices[0].Devices[0].Capacity["memory"].Value; value.Value() != 81920 {
		t.Fatalf("memory %v", value.String())
	}
}

func TestAClaimWithNothingOfThisDriverWritesNoSpec(t *testing.T) {
	d := newDriver(t)
	c := claim("uid-5", nil)
	c.Status.Allocation.Devices.Results[0].Driver = "gpu.nvidia.com"
	if _, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.specPath("uid-5")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a CDI spec without devices was written: %v", err)
	}
}

func TestErrorsRetryingCannotMendStopThePlugin(t *testing.T) {
	gone := apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "s", errors.New("no"))
	// As the helper hands them over: every publishing error wrapped as recoverable (kubeletplugin v0.36.4
	// draplugin.go, recoverableError), whatever its cause.
	recoverable := func(err error) error { return fmt.Errorf("%w: %w", kubeletplugin.ErrRecoverable, err) }
	for err, want := range map[error]bool{
		recoverable(gone): true,
		recoverable(&resourceslice.DroppedFieldsError{}): true,
		errors.New("grpc server failed"):                 true,
		recoverable(errors.New("conflict")):              false,
	} {
		stopped := false
		d := &Driver{stop: func(error) { stopped = true }}
		d.HandleError(context.Background(), err, "publishing")
		if stopped != want {
			t.Errorf("%v: stopped %v, want %v", err, stopped, want)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestTheCDISpecIsValidAtTheVersionItClaims holds a prepared claim's spec against the CDI project's own reading of
// which spec version each feature needs (a UID starting with a digit, for one).
func TestTheCDISpecIsValidAtTheVersionItClaims(t *testing.T) {
	d := newDriver(t)
	c := claim("8e5f0c2a-1b3d-4e6f-9a7b-0c1d2e3f4a5b", nil)
	if results, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c}); results[c.UID].Err != nil {
		t.Fatal(results[c.UID].Err)
	}
	data, err := os.ReadFile(d.specPath(c.UID))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	needed, err := cdispec.MinimumRequiredVersion(&spec)
	if err != nil || needed != cdiVersion {
		t.Fatalf("the spec needs CDI %s (%v), and says %s", needed, err, cdiVersion)
	}
}
