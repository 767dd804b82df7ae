package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// TestTheKubeletsCallsOverGRPC is the kubelet's side of the wire: the helper started as main.go starts it (without
// the registration socket, which needs the kubelet), the DRA service dialled on its socket, NodePrepareResources and
// NodeUnprepareResources called as kubelet v1.36.4 calls them. The helper reads the claim from the API server (a
// fake clientset holding it, allocated as kube-scheduler leaves it), checks its UID and hands it to the Driver.
func TestTheKubeletsCallsOverGRPC(t *testing.T) {
	d := newDriver(t)
	c := claim("uid-grpc", map[resourceapi.QualifiedName]resource.Quantity{
		"memory": resource.MustParse("20k"), "cores": resource.MustParse("30"),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(fake.NewClientset(c)),
		kubeletplugin.DriverName(d.devices.Driver),
		kubeletplugin.NodeName(d.devices.Node),
		kubeletplugin.RegistrationService(false),
		kubeletplugin.PluginDataDirectoryPath(dir),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Stop()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kubelet := drapb.NewDRAPluginClient(conn)
	call, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	asked := []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}
	prepared, err := kubelet.NodePrepareResources(call, &drapb.NodePrepareResourcesRequest{Claims: asked})
	if err != nil {
		t.Fatal(err)
	}
	answer := prepared.Claims[string(c.UID)]
	if answer == nil || answer.Error != "" || len(answer.Devices) != 1 {
		t.Fatalf("prepare answered %+v", prepared.Claims)
	}
	device := answer.Devices[0]
	if device.PoolName != "tenant-b-worker" || device.DeviceName != "gpu-0" || device.GetShareId() != "share-uid-grpc" ||
		len(device.CdiDeviceIds) != 1 || device.CdiDeviceIds[0] != "gpu.gpulab.io/gpu=claim-uid-grpc-0" {
		t.Fatalf("device %+v", device)
	}
	if env := readSpec(t, d.specPath(c.UID)).Devices[0].ContainerEdits.Env; env[2] != "GPULAB_GPU_MEMORY_MB=20000" {
		t.Fatalf("env %v", env)
	}
	// A claim whose UID is not the API server's (deleted and made again under its name) is refused by the helper
	// before the Driver sees it ("got replaced": the call fails, the kubelet asks again), and nothing is written.
	stale := []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: "another-uid"}}
	_, err = kubelet.NodePrepareResources(call, &drapb.NodePrepareResourcesRequest{Claims: stale})
	if err == nil || !strings.Contains(err.Error(), "got replaced") || fileExists(d.specPath("another-uid")) {
		t.Fatalf("a stale claim: %v", err)
	}
	unprepared, err := kubelet.NodeUnprepareResources(call, &drapb.NodeUnprepareResourcesRequest{Claims: asked})
	if err != nil || unprepared.Claims[string(c.UID)] == nil || unprepared.Claims[string(c.UID)].Error != "" {
		t.Fatalf("unprepare: %v %+v", err, unprepared)
	}
	if spec := d.specPath(c.UID); fileExists(spec) {
		t.Fatalf("%s is still there after unprepare", spec)
	}
}
