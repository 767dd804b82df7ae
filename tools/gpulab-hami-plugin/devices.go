package main

// The devices the plugin lists to the kubelet for its three resources, and the size of that list on the wire.

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The resources, as HAMi's chart names them (charts/hami/values.yaml resourceName, resourceMem, resourceCores at
// v2.8.3 and v2.10.0).
const (
	ResourceGPU      = "nvidia.com/gpu"
	ResourceGPUMem   = "nvidia.com/gpumem"
	ResourceGPUCores = "nvidia.com/gpucores"
	// resourceMemPercentage at both tags; HAMi's own plugin does not register it, the upstream mock does.
	ResourceGPUMemPercentage = "nvidia.com/gpumem-percentage"
)

// kubeletMaxMessage is the largest message the kubelet receives from a device plugin: it dials the plugin with
// grpc-go's defaults (kubernetes v1.36.4 pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go dial), whose
// receive limit is 4 MiB. A ListAndWatch answer over it never arrives, and the resource stays at 0 (the caveat of
// github.com/Project-HAMi/mock-device-plugin's README: "If the counted memory is too large, for example exceeding
// 120GB, it will display as 0 ... set the memoryFactor").
const kubeletMaxMessage = 4 * 1024 * 1024

// mockDeviceID is the ID of the i-th device of a counted resource (gpumem, gpucores), the format of the upstream
// mock plugin (mock-device-plugin internal/pkg/mock/server.go ListAndWatch: "mock-devices-id-%d"), whose size
// the caveat above was measured with.
func mockDeviceID(i int64) string { return fmt.Sprintf("mock-devices-id-%d", i) }

// gpuDevices are HAMi's virtual devices of nvidia.com/gpu: split_count of them per card, "<card id>-<i>", all
// healthy, without topology (HAMi pkg/device-plugin/nvidiadevice/nvinternal/rm/devices.go GetPluginDevices at
// v2.8.3 and v2.10.0; v2.10.0 adds the card's NUMA node only when enableNumaTopology is set, false by default).
func gpuDevices(cards []Card) []*pluginapi.Device {
	var devices []*pluginapi.Device
	for _, card := range cards {
		for i := int64(0); i < card.SplitCount; i++ {
			devices = append(devices, &pluginapi.Device{ID: fmt.Sprintf("%s-%d", card.ID, i), Health: pluginapi.Healthy})
		}
	}
	return devices
}

// gpumemDevices: one device per MB of all cards, divided by the memory factor (mock-device-plugin
// internal/pkg/api/device/nvidia/device.go GetResource: the sum of the cards' devmem, divided by memoryFactor when
// it is above 1).
func gpumemDevices(cards []Card, factor int64) []*pluginapi.Device {
	return countedDevices(totalMemory(cards) / factor)
}

// gpucoresDevices: one device per percent of all cards' cores (the same GetResource: the sum of devcore).
func gpucoresDevices(cards []Card) []*pluginapi.Device {
	var total int64
	for _, card := range cards {
		total += card.Cores
	}
	return countedDevices(total)
}

// gpumemPercentageDevices: 100 per card (the same GetResource: `resourceMap[memoryPercentageName] += 100` per
// device), so that a pod asking nvidia.com/gpumem-percentage is counted by the kubelet as on the mock's nodes.
func gpumemPercentageDevices(cards []Card) []*pluginapi.Device {
	return countedDevices(100 * int64(len(cards)))
}

func countedDevices(count int64) []*pluginapi.Device {
	devices := make([]*pluginapi.Device, count)
	for i := range devices {
		devices[i] = &pluginapi.Device{ID: mockDeviceID(int64(i)), Health: pluginapi.Healthy}
	}
	return devices
}

// entrySize is the encoded size of the i-th counted device within a ListAndWatchResponse, field by field as
// protobuf encodes it (devices_test.go holds the sum to proto.Size): the response's field 1 (devices), each a
// message of field 1 (ID) and field 2 (health).
func entrySize(i int64) int {
	id := len(mockDeviceID(i))
	device := 1 + protowire.SizeVarint(uint64(id)) + id +
		1 + protowire.SizeVarint(uint64(len(pluginapi.Healthy))) + len(pluginapi.Healthy)
	return 1 + protowire.SizeVarint(uint64(device)) + device
}

// maxCountedDevices is the most counted devices one ListAndWatch message to the kubelet holds.
func maxCountedDevices() int64 {
	size := 0
	for i := int64(0); ; i++ {
		size += entrySize(i)
		if size > kubeletMaxMessage {
			return i
		}
	}
}
