package main

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// hamiDeviceInfo is how HAMi's scheduler reads the register annotation: pkg/device/devices.go UnMarshalNodeDevices,
// json.Unmarshal into []*DeviceInfo (the fields the plugin writes, with their tags; the same at both tags).
type hamiDeviceInfo struct {
	ID      string `json:"id,omitempty"`
	Index   uint   `json:"index,omitempty"`
	Count   int32  `json:"count,omitempty"`
	Devmem  int32  `json:"devmem,omitempty"`
	Devcore int32  `json:"devcore,omitempty"`
	Type    string `json:"type,omitempty"`
	Numa    int    `json:"numa,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Health  bool   `json:"health,omitempty"`
}

// TestTheRegisterAnnotationIsHAMisEncoding stands for the boundary to HAMi's scheduler, which reads
// hami.io/node-nvidia-register: the bytes are what json.Marshal of HAMi's DeviceInfo gives at each release
// (v2.8.3's DevicePairScore struct is never omitted), and they decode to the same devices as the annotations of
// HAMi's own tests (v2.10.0 pkg/scheduler/scheduler_test.go: `[{"id":"GPU-0","count":10,"devmem":8192,
// "devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0,"mode":"hami-core"}]`).
func TestTheRegisterAnnotationIsHAMisEncoding(t *testing.T) {
	cards := testCards(t)
	want := map[string]string{
		V2100: `[{"id":"GPU-MOCK-tenant-b-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true},` +
			`{"id":"GPU-MOCK-tenant-b-1","index":1,"count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true}]`,
		V283: `[{"id":"GPU-MOCK-tenant-b-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true,"devicepairscore":{}},` +
			`{"id":"GPU-MOCK-tenant-b-1","index":1,"count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true,"devicepairscore":{}}]`,
	}
	for version, text := range want {
		got, err := RegisterAnnotation(version, cards)
		if err != nil || got != text {
			t.Fatalf("%s: %v\n got %s\nwant %s", version, err, got, text)
		}
	}
	hamis := `[{"id":"GPU-0","count":10,"devmem":8192,"devcore":100,"type":"NVIDIA-A100","numa":0,"health":true,"index":0,"mode":"hami-core"}]`
	var fromHAMi []hamiDeviceInfo
	if err := json.Unmarshal([]byte(hamis), &fromHAMi); err != nil {
		t.Fatal(err)
	}
	// The NVML name without its "NVIDIA" prefix gets "NVIDIA-" (plugin/register.go getAPIDevices).
	card := []Card{{ID: "GPU-0", Index: 0, Type: "A100", MemoryMB: 8192, Cores: 100, SplitCount: 10}}
	for _, version := range Versions {
		ours, err := RegisterAnnotation(version, card)
		if err != nil {
			t.Fatal(err)
		}
		var decoded []hamiDeviceInfo
		if err := json.Unmarshal([]byte(ours), &decoded); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(decoded, fromHAMi) {
			t.Fatalf("%s: %s decodes to %+v, HAMi's to %+v", version, ours, decoded, fromHAMi)
		}
	}
}

// TestTheRegistrarPatchesAsHAMisWatchAndRegister stands for the boundary to the API server's node object: the
// annotation is patched once, not again while it is unchanged, and 5 s (here shortened) after a failed patch it is
// patched again; a registrar started anew (a kubelet restart) patches again.
func TestTheRegistrarPatchesAsHAMisWatchAndRegister(t *testing.T) {
	client := newClient(nodeWithLock(""))
	var patches, failures atomic.Int32
	failures.Store(1)
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		if failures.Add(-1) >= 0 {
			return true, nil, errors.New("the API server is away")
		}
		return false, nil, nil
	})
	annotation, err := RegisterAnnotation(V2100, testCards(t))
	if err != nil {
		t.Fatal(err)
	}
	start := func() (context.CancelFunc, chan struct{}) {
		reg := &registrar{node: testNode, client: client, annotation: annotation, period: 50 * time.Millisecond,
			retry: 10 * time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); reg.run(ctx) }()
		return cancel, done
	}
	cancel, done := start()
	eventually(t, "the annotation patched", func() bool { return getNode(t, client).Annotations[annoRegister] == annotation })
	time.Sleep(300 * time.Millisecond) // six periods
	if got := patches.Load(); got != 2 {
		t.Fatalf("%d patches: want the failed one and one more", got)
	}
	cancel()
	<-done
	cancel, done = start()
	defer func() { cancel(); <-done }()
	eventually(t, "a new registrar patches again", func() bool { return patches.Load() == 3 })
}
