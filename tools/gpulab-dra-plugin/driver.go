package main

// The node side of gpulab's DRA driver for simulated cards: what the kubelet asks of a driver through
// k8s.io/dynamic-resource-allocation v0.36.4's kubeletplugin helper (DRAPlugin: PrepareResourceClaims,
// UnprepareResourceClaims, HandleError), and the node's devices as the ResourceSlice it publishes.
//
// A prepared claim is a CDI spec file of its own (named by the claim's UID, as the helper's documentation
// advises, so a runtime's cache never mistakes one claim for another), whose devices set the card's id,
// memory (MB) and cores (%) in the container's environment. Unprepare removes the file. The file is the
// driver's whole state: a driver restarted between prepare and unprepare finds what to undo by the UID alone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// Capacity names, as gpulab writes them (model/dra.py): memory in MB as HAMi counts it, cores in percent.
const (
	memoryCapacity = "memory"
	coresCapacity  = "cores"
	// CDI kind of gpulab's devices: "<vendor>/<class>" with the driver's own DNS name as vendor.
	cdiClass = "gpu"
	// The earliest CDI spec version, and all a prepared claim needs: devices with containerEdits.env (checked by
	// TestTheCDISpecIsValidAtTheVersionItClaims with the CDI project's own specs-go v1.1.1 MinimumRequiredVersion).
	cdiVersion = "0.3.0"
)

// NodeDevices is what gpulab hands the plugin (model/dra.py node_devices): the driver's name, the node (the pool's
// name) and the node's cards as resource.k8s.io/v1 devices.
type NodeDevices struct {
	Driver  string               `json:"driver"`
	Node    string               `json:"node"`
	Devices []resourceapi.Device `json:"devices"`
}

// ReadNodeDevices reads and checks the devices file: every device named once, with gpulab's two capacities.
func ReadNodeDevices(path string) (NodeDevices, error) {
	var nd NodeDevices
	data, err := os.ReadFile(path)
	if err != nil {
		return nd, err
	}
	decoder := json.NewDecoder(strings.NewReader(string(data)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&nd); err != nil {
		return nd, fmt.Errorf("%s: %w", path, err)
	}
	if nd.Driver == "" || nd.Node == "" || len(nd.Devices) == 0 {
		return nd, fmt.Errorf("%s: driver, node and at least one device are required", path)
	}
	seen := map[string]bool{}
	for _, device := range nd.Devices {
		if seen[device.Name] {
			return nd, fmt.Errorf("%s: device %q is listed twice", path, device.Name)
		}
		seen[device.Name] = true
		for _, name := range []resourceapi.QualifiedName{memoryCapacity, coresCapacity} {
			if _, ok := device.Capacity[name]; !ok {
				return nd, fmt.Errorf("%s: device %q has no %q capacity", path, device.Name, name)
			}
		}
	}
	return nd, nil
}

// Resources is the node's one pool, one slice, as the kubeletplugin helper publishes it.
func (nd NodeDevices) Resources() resourceslice.DriverResources {
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{nd.Node: {Slices: []resourceslice.Slice{{Devices: nd.Devices}}}},
	}
}

// Driver prepares and unprepares claims on the node.
type Driver struct {
	devices NodeDevices
	cdiDir  string
	stop    context.CancelCauseFunc // a fatal background error ends the plugin (HandleError)
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

func (d *Driver) cdiKind() string { return d.devices.Driver + "/" + cdiClass }

func (d *Driver) specPath(uid types.UID) string {
	// One file per claim: "<vendor>-<class>_<claim uid>.json" (a CDI spec file's name only needs the .json suffix).
	return filepath.Join(d.cdiDir, fmt.Sprintf("%s-%s_%s.json", d.devices.Driver, cdiClass, uid))
}

type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env"`
}

// PrepareResourceClaims writes each claim's CDI spec and names its devices for the kubelet.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "preparing claim", "claim", klog.KObj(claim))
		} else {
			klog.FromContext(ctx).Info("prepared claim", "claim", klog.KObj(claim), "devices", len(devices))
		}
		results[claim.UID] = kubeletplugin.PrepareResult{Err: err, Devices: devices}
	}
	return results, nil
}

func (d *Driver) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	spec := cdiSpec{Version: cdiVersion, Kind: d.cdiKind()}
	var prepared []kubeletplugin.Device
	for i, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != d.devices.Driver {
			continue // another driver's part of the claim
		}
		if result.Pool != d.devices.Node {
			return nil, fmt.Errorf("claim %s/%s: device %s is in pool %s, not this node's (%s)",
				claim.Namespace, claim.Name, result.Device, result.Pool, d.devices.Node)
		}
		device, ok := d.device(result.Device)
		if !ok {
			return nil, fmt.Errorf("claim %s/%s: this node has no device %s", claim.Namespace, claim.Name, result.Device)
		}
		env, err := environment(device, result)
		if err != nil {
			return nil, fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		// Unique per claim and result, never reused; "claim-" first: a name starting with a digit (as a UID may)
		// needs CDI spec 0.5.0 (container-device-interface specs-go v1.1.1 version.go, requiresV050).
		name := fmt.Sprintf("claim-%s-%d", claim.UID, i)
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, ContainerEdits: cdiEdits{Env: env}})
		prepared = append(prepared, kubeletplugin.Device{
			Requests:     []string{result.Request},
			PoolName:     result.Pool,
			DeviceName:   result.Device,
			CDIDeviceIDs: []string{d.cdiKind() + "=" + name},
			ShareID:      result.ShareID,
		})
	}
	if len(spec.Devices) == 0 {
		return nil, nil // nothing of this driver's in the claim: no CDI spec (one without devices is invalid)
	}
	if err := writeFile(d.specPath(claim.UID), spec); err != nil {
		return nil, fmt.Errorf("claim %s/%s: writing its CDI spec: %w", claim.Namespace, claim.Name, err)
	}
	return prepared, nil
}

func (d *Driver) device(name string) (resourceapi.Device, bool) {
	for _, device := range d.devices.Devices {
		if device.Name == name {
			return device, true
		}
	}
	return resourceapi.Device{}, false
}

// environment is what a container of the claim sees of its card share: the share's consumed capacity (the
// allocator's record of what it took), or the device's default when the allocation records none.
func environment(device resourceapi.Device, result resourceapi.DeviceRequestAllocationResult) ([]string, error) {
	env := []string{"GPULAB_GPU_DEVICE=" + device.Name}
	if uuid, ok := device.Attributes["uuid"]; ok && uuid.StringValue != nil {
		env = append(env, "GPULAB_GPU_UUID="+*uuid.StringValue)
	}
	for _, item := range []struct {
		capacity resourceapi.QualifiedName
		variable string
	}{{memoryCapacity, "GPULAB_GPU_MEMORY_MB"}, {coresCapacity, "GPULAB_GPU_CORES"}} {
		quantity, ok := result.ConsumedCapacity[item.capacity]
		if !ok {
			capacity := device.Capacity[item.capacity]
			quantity = capacity.Value
			if capacity.RequestPolicy != nil && capacity.RequestPolicy.Default != nil {
				quantity = *capacity.RequestPolicy.Default
			}
		}
		value, exact := quantity.AsInt64()
		if !exact {
			return nil, fmt.Errorf("device %s: %s %s is not a whole number", device.Name, item.capacity, quantity.String())
		}
		env = append(env, fmt.Sprintf("%s=%d", item.variable, value))
	}
	sort.Strings(env)
	return env, nil
}

// writeFile writes the spec whole or not at all: a runtime reading the directory never sees half a file.
func writeFile(path string, spec cdiSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	partial := path + ".partial"
	if err := os.WriteFile(partial, data, 0o644); err != nil {
		return err
	}
	return os.Rename(partial, path)
}

// UnprepareResourceClaims removes each claim's CDI spec; a claim never prepared (or already undone) is no error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err == nil {
			klog.FromContext(ctx).Info("unprepared claim", "claim", claim.NamespacedName)
		}
		results[claim.UID] = err
	}
	return results, nil
}

// HandleError logs a background error. Publishing the slice is retried by the helper (it hands every publishing
// error over as recoverable, kubeletplugin v0.36.4 draplugin.go), but some cannot mend by retrying: the API server
// refusing the slice (invalid, or forbidden to these credentials) or dropping its fields (a feature it lacks, such
// as consumable capacity). Those, and every error the helper calls fatal, end the plugin, whose unit then says so
// (systemctl status), instead of a node that silently advertises nothing.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if fatal(err) && d.stop != nil {
		d.stop(fmt.Errorf("%s: %w", msg, err))
	}
}

func fatal(err error) bool {
	var dropped *resourceslice.DroppedFieldsError
	switch {
	case errors.As(err, &dropped), apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return true
	default:
		return !errors.Is(err, kubeletplugin.ErrRecoverable)
	}
}
