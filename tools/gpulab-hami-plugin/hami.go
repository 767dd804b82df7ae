package main

// HAMi's wire formats, as the scheduler and the NVIDIA device plugin of each release read and write them: the node's
// register annotation and the pod's device annotations. Written here from their description in HAMi's source (cited
// at each function); nothing of HAMi is linked.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Annotation keys and values, the same at v2.8.3 and v2.10.0: pkg/util/types.go (vgpu-node, bind-time, bind-phase
// and its values), pkg/device/nvidia/device.go (RegisterAnnos, NodeLockNvidia, NvidiaGPUDevice,
// InitNvidiaDevice's InRequestDevices and SupportDevices), pkg/util/nodelock/nodelock.go (NodeLockKey, NodeLockSep).
const (
	annoRegister   = "hami.io/node-nvidia-register"
	annoToAllocate = "hami.io/vgpu-devices-to-allocate"
	annoAllocated  = "hami.io/vgpu-devices-allocated"
	annoVGPUNode   = "hami.io/vgpu-node"
	annoBindTime   = "hami.io/bind-time"
	annoBindPhase  = "hami.io/bind-phase"
	annoNodeLock   = "hami.io/mutex.lock"

	phaseAllocating = "allocating"
	phaseSuccess    = "success"
	phaseFailed     = "failed"

	nodeLockSep  = ","
	modeHamiCore = "hami-core"
)

// vendorWords are the device types HAMi's plugin looks for in the pod's to-allocate annotation before it calls the
// pod's allocation done (plugin/util.go PodAllocationTrySuccess ranges over device.DevicesToHandle: the common word
// of every device pkg/scheduler/config/config.go InitDevicesWithConfig initialises). Ascend's and Iluvatar's words
// come from the device config of a cluster with those cards and are not listed.
var vendorWords = map[string][]string{
	V283:  {"NVIDIA", "MLU", "DCU", "GCU", "Enflame", "Mthreads", "Metax-GPU", "Metax-SGPU", "kunlun", "XPU", "AWSNeuron", "AMD"},
	V2100: {"NVIDIA", "MLU", "DCU", "GCU", "Enflame", "Mthreads", "Metax-GPU", "Metax-SGPU", "kunlun", "XPU", "AWSNeuron", "AMD", "Vastai", "Biren"},
}

// deviceInfo2100 is pkg/device/devices.go DeviceInfo at v2.10.0, field for field in order with its JSON tags (the
// encoding the register annotation uses: MarshalNodeDevices is json.Marshal of these). The fields this plugin
// never fills (MIG profiles and templates, vendor, custom info) keep HAMi's names and are always empty, so
// omitted, as in HAMi's own annotation without MIG; DevicePairScore is `json:"-"` there, so absent here.
type deviceInfo2100 struct {
	ID           string            `json:"id,omitempty"`
	Index        uint              `json:"index,omitempty"`
	Count        int32             `json:"count,omitempty"`
	Devmem       int32             `json:"devmem,omitempty"`
	Devcore      int32             `json:"devcore,omitempty"`
	Type         string            `json:"type,omitempty"`
	Numa         int               `json:"numa,omitempty"`
	Mode         string            `json:"mode,omitempty"`
	MIGProfiles  []json.RawMessage `json:"migProfiles,omitempty"`
	MIGTemplate  []json.RawMessage `json:"migtemplate,omitempty"`
	Health       bool              `json:"health,omitempty"`
	DeviceVendor string            `json:"devicevendor,omitempty"`
	CustomInfo   map[string]any    `json:"custominfo,omitempty"`
}

// deviceInfo283 is DeviceInfo at v2.8.3: no MIG profiles, and DevicePairScore is a struct tagged
// `json:"devicepairscore,omitempty"`, which encoding/json never omits (omitempty does not apply to structs): every
// device of a v2.8.3 annotation ends with "devicepairscore":{}.
type deviceInfo283 struct {
	ID              string            `json:"id,omitempty"`
	Index           uint              `json:"index,omitempty"`
	Count           int32             `json:"count,omitempty"`
	Devmem          int32             `json:"devmem,omitempty"`
	Devcore         int32             `json:"devcore,omitempty"`
	Type            string            `json:"type,omitempty"`
	Numa            int               `json:"numa,omitempty"`
	Mode            string            `json:"mode,omitempty"`
	MIGTemplate     []json.RawMessage `json:"migtemplate,omitempty"`
	Health          bool              `json:"health,omitempty"`
	DeviceVendor    string            `json:"devicevendor,omitempty"`
	CustomInfo      map[string]any    `json:"custominfo,omitempty"`
	DevicePairScore devicePairScore   `json:"devicepairscore,omitempty"`
}

// devicePairScore is pkg/device/devices.go DevicePairScore (both tags).
type devicePairScore struct {
	ID     string         `json:"uuid,omitempty"`
	Scores map[string]int `json:"score,omitempty"`
}

// cardType is the type HAMi registers for a card: the NVML name, with "NVIDIA-" before it when it does not start
// with "NVIDIA" (plugin/register.go getAPIDevices, both tags).
func cardType(card Card) string {
	if strings.HasPrefix(card.Type, "NVIDIA") {
		return card.Type
	}
	return "NVIDIA-" + card.Type
}

// RegisterAnnotation is the value of hami.io/node-nvidia-register for the cards, as HAMi's plugin of `version`
// writes it (plugin/register.go getAPIDevices and RegisterInAnnotation, pkg/device/devices.go MarshalNodeDevices):
// count = deviceSplitCount, devmem = the card's memory in MB (deviceMemoryScaling 1, the chart's default), devcore
// = its cores (deviceCoreScaling 1 makes 100 for a whole card), mode hami-core, healthy, NUMA node 0 (HAMi reads
// sysfs and keeps 0 when it cannot). The devices keep the cards file's order (HAMi's follows a map's).
func RegisterAnnotation(version string, cards []Card) (string, error) {
	var list any
	switch version {
	case V2100:
		devices := make([]*deviceInfo2100, 0, len(cards))
		for _, card := range cards {
			devices = append(devices, &deviceInfo2100{ID: card.ID, Index: uint(card.Index), Count: int32(card.SplitCount),
				Devmem: int32(card.MemoryMB), Devcore: int32(card.Cores), Type: cardType(card), Mode: modeHamiCore,
				Health: true})
		}
		list = devices
	case V283:
		devices := make([]*deviceInfo283, 0, len(cards))
		for _, card := range cards {
			devices = append(devices, &deviceInfo283{ID: card.ID, Index: uint(card.Index), Count: int32(card.SplitCount),
				Devmem: int32(card.MemoryMB), Devcore: int32(card.Cores), Type: cardType(card), Mode: modeHamiCore,
				Health: true})
		}
		list = devices
	default:
		return "", CheckVersion(version)
	}
	data, err := json.Marshal(list)
	return string(data), err
}

// containerDevice is one card share of a container in the pod annotations (pkg/device/devices.go ContainerDevice:
// UUID, Type, Usedmem in MB, Usedcores in percent).
type containerDevice struct {
	UUID      string
	Type      string
	Usedmem   int32
	Usedcores int32
}

// podDevices holds the containers' card shares in the annotation's order (init containers first, then the others,
// as the scheduler encodes them).
type podDevices [][]containerDevice

var errDeviceRequestNotFound = errors.New("device request not found")

// decodeContainerDevices reads one container's part: "UUID,TYPE,MEM,CORES:" per card (pkg/device/devices.go
// DecodeContainerDevices). A part of fewer than four fields is an error at both tags; a number that does not parse
// is 0 at v2.8.3 (its errors are dropped) and an error at v2.10.0.
func decodeContainerDevices(version, text string) ([]containerDevice, error) {
	devices := []containerDevice{}
	for _, part := range strings.Split(text, ":") {
		if !strings.Contains(part, ",") {
			continue
		}
		fields := strings.Split(part, ",")
		if len(fields) < 4 {
			return nil, errors.New("pod annotation format error, missing fields, do not use nodeName in task spec")
		}
		memory, errMemory := strconv.ParseInt(fields[2], 10, 32)
		cores, errCores := strconv.ParseInt(fields[3], 10, 32)
		if version == V2100 {
			if errMemory != nil {
				return nil, fmt.Errorf("invalid memory field: %w", errMemory)
			}
			if errCores != nil {
				return nil, fmt.Errorf("invalid core field: %w", errCores)
			}
		}
		devices = append(devices, containerDevice{UUID: fields[0], Type: fields[1], Usedmem: int32(memory),
			Usedcores: int32(cores)})
	}
	return devices, nil
}

// decodePodDevices reads the NVIDIA to-allocate annotation, split per container at ";" (pkg/device/devices.go
// DecodePodDevices). v2.10.0 keeps every part, empty ones included (so a part's position is its container's), and
// returns a part's error; v2.8.3 drops the empty parts and, on a part's error, answers as if the pod had no
// annotation. Without the annotation the answer is errDeviceRequestNotFound, the error both releases' callers give
// then (plugin/util.go GetNextDeviceRequest at v2.8.3, decodePodSingleDevice at v2.10.0).
func decodePodDevices(version string, annotations map[string]string) (podDevices, error) {
	text, ok := annotations[annoToAllocate]
	if !ok {
		return nil, errDeviceRequestNotFound
	}
	pod := podDevices{}
	for _, part := range strings.Split(text, ";") {
		devices, err := decodeContainerDevices(version, part)
		if err != nil {
			if version == V283 {
				return nil, errDeviceRequestNotFound
			}
			return nil, err
		}
		if version == V283 && len(devices) == 0 {
			continue
		}
		pod = append(pod, devices)
	}
	return pod, nil
}

// encodePodDevices writes the containers back: each card "UUID,TYPE,MEM,CORES:" and ";" after each container
// (pkg/device/devices.go EncodeContainerDevices and EncodePodSingleDevice, both tags).
func encodePodDevices(pod podDevices) string {
	var text strings.Builder
	for _, devices := range pod {
		for _, device := range devices {
			fmt.Fprintf(&text, "%s,%s,%d,%d:", device.UUID, device.Type, device.Usedmem, device.Usedcores)
		}
		text.WriteString(";")
	}
	return text.String()
}
