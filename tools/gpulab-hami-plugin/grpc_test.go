package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet is the kubelet's registration service on its socket in the device plugin folder (kubernetes v1.36.4
// pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go Register): it refuses another API version and keeps what it
// was asked.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	server   *grpc.Server
	mu       sync.Mutex
	requests []*pluginapi.RegisterRequest
}

func (k *fakeKubelet) Register(_ context.Context, request *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, request)
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) registered() map[string]*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]*pluginapi.RegisterRequest{}
	for _, request := range k.requests {
		out[request.ResourceName] = request
	}
	return out
}

// startKubelet serves the registration socket, made anew (as a restarted kubelet makes it: a new file).
func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	socket := filepath.Join(dir, kubeletSocketName)
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{server: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(k.server, k)
	go func() { _ = k.server.Serve(listener) }()
	return k
}

// dialPlugin is the kubelet's connection to a registered plugin: the endpoint it was given, in its folder.
func dialPlugin(t *testing.T, dir, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// firstList is the first ListAndWatch answer: what the kubelet counts as the node's capacity of the resource.
func firstList(t *testing.T, client pluginapi.DevicePluginClient) []*pluginapi.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	response, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return response.Devices
}

// TestTheKubeletsSideOverGRPC stands for the kubelet's side of the device plugin API v1beta1 over unix sockets: the
// plugin registers its four resources with a fake kubelet registration server (version v1beta1, its socket's name
// as endpoint); dialled there, each resource lists the devices the kubelet turns into the node's allocatable (the
// quantity the API server then shows: "20" virtual GPUs, "81920" MB at memory factor 2, "200" cores); the options
// and Allocate are each release's; the node gets its register annotation; and when the kubelet restarts (its socket
// made anew, its plugins forgotten) every resource registers again and the annotation is patched again.
func TestTheKubeletsSideOverGRPC(t *testing.T) {
	for _, version := range Versions {
		t.Run(version, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "dp") // short: a unix socket path has at most 107 bytes
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			kubelet := startKubelet(t, dir)
			defer func() { kubelet.server.Stop() }()

			annotation := "GPU-MOCK-tenant-b-1,NVIDIA,20000,30:;"
			pod := boundPod(t, "trainer", annotation, phaseAllocating, nil, []container{{"main", gpuLimits("1", "20k", "30")}})
			client := newClient(nodeWithLock(lockOf("default", "trainer")), pod)
			config := Config{Version: version, Node: testNode, Cards: testCards(t), MemoryFactor: 2, SocketDir: dir,
				HookPath: DefaultHookPath}
			plugin := NewPlugin(config, client)
			plugin.WatchEvery = 20 * time.Millisecond
			plugin.newUUID = func() string { return testUUID }
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- plugin.Run(ctx) }()
			defer func() {
				stop()
				if err := <-done; err != nil {
					t.Error(err)
				}
				for _, socket := range []string{"nvidia-gpu.sock", "nvidia-gpumem.sock", "nvidia-gpucores.sock"} {
					if _, err := os.Stat(filepath.Join(dir, socket)); !os.IsNotExist(err) {
						t.Errorf("%s left behind: %v", socket, err)
					}
				}
			}()

			eventually(t, "four registrations", func() bool { return len(kubelet.registered()) == 4 })
			// Registered is not listed: until the kubelet has each resource's devices, a pod's admission would not
			// find them, so the annotation HAMi places by is not there yet (the gpu resource registered first).
			if value, ok := getNode(t, client).Annotations[annoRegister]; ok {
				t.Fatalf("the register annotation before the kubelet listed any device: %s", value)
			}
			wantCount := map[string]string{
				ResourceGPU: "20", ResourceGPUMem: "81920", ResourceGPUCores: "200", ResourceGPUMemPercentage: "200",
			}
			for name, request := range kubelet.registered() {
				if request.Version != pluginapi.Version || filepath.Dir(filepath.Join(dir, request.Endpoint)) != dir {
					t.Fatalf("%s: %+v", name, request)
				}
				devices := firstList(t, dialPlugin(t, dir, request.Endpoint))
				if got := resource.NewQuantity(int64(len(devices)), resource.DecimalSI).String(); got != wantCount[name] {
					t.Fatalf("%s: %s devices, want %s", name, got, wantCount[name])
				}
				for _, device := range devices {
					if device.Health != pluginapi.Healthy {
						t.Fatalf("%s: %+v", name, device)
					}
				}
				if name == ResourceGPU && (devices[0].ID != "GPU-MOCK-tenant-b-0-0" || devices[19].ID != "GPU-MOCK-tenant-b-1-9") {
					t.Fatalf("gpu IDs %s .. %s", devices[0].ID, devices[19].ID)
				}
			}
			gpu := dialPlugin(t, dir, kubelet.registered()[ResourceGPU].Endpoint)
			call, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			options, err := gpu.GetDevicePluginOptions(call, &pluginapi.Empty{})
			if err != nil || options.GetPreferredAllocationAvailable != (version == V2100) {
				t.Fatalf("options %+v %v", options, err)
			}
			answer, err := gpu.Allocate(call, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
				{DevicesIds: []string{"GPU-MOCK-tenant-b-1-7"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			expectEnv(t, answer.ContainerResponses[0].Envs, hamiEnv("GPU-MOCK-tenant-b-1", []string{"20000m"}, "30"))
			expectPod(t, client, "trainer", map[string]string{V283: ";", V2100: ";;"}[version], phaseSuccess)
			expectLock(t, client, "")
			want, _ := RegisterAnnotation(version, config.Cards)
			eventually(t, "the register annotation", func() bool { return getNode(t, client).Annotations[annoRegister] == want })

			// The kubelet restarts: it removes its plugins' sockets and makes its own anew.
			kubelet.server.Stop()
			for _, socket := range []string{"nvidia-gpu.sock", "nvidia-gpumem.sock", "nvidia-gpucores.sock"} {
				_ = os.Remove(filepath.Join(dir, socket))
			}
			node := getNode(t, client)
			delete(node.Annotations, annoRegister)
			if _, err := client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			kubelet = startKubelet(t, dir)
			eventually(t, "four registrations again", func() bool { return len(kubelet.registered()) == 4 })
			for name, request := range kubelet.registered() {
				if name == ResourceGPUMem {
					continue
				}
				firstList(t, dialPlugin(t, dir, request.Endpoint))
			}
			if value, ok := getNode(t, client).Annotations[annoRegister]; ok {
				t.Fatalf("the register annotation before the kubelet listed %s: %s", ResourceGPUMem, value)
			}
			devices := firstList(t, dialPlugin(t, dir, kubelet.registered()[ResourceGPUMem].Endpoint))
			if len(devices) != 81920 {
				t.Fatalf("%d gpumem devices after the restart", len(devices))
			}
			eventually(t, "the register annotation again", func() bool { return getNode(t, client).Annotations[annoRegister] == want })
		})
	}
}

// TestTheAnnotationWaitsForEveryResourcesList: whichever resource's first list is the last one sent, the registrar
// has not started before it (allListed), and each served resource marks its own list when the kubelet's
// ListAndWatch is answered (resources, listAndWatch), so the gate holds for all four, not only for one.
func TestTheAnnotationWaitsForEveryResourcesList(t *testing.T) {
	plugin := NewPlugin(Config{Version: V2100, Node: testNode, Cards: testCards(t), MemoryFactor: 2}, newClient())
	stop := make(chan struct{})
	defer close(stop)
	served := plugin.resources(stop)
	if len(served) != 4 {
		t.Fatalf("%d resources", len(served))
	}
	lists := make([]*listSent, len(served))
	for i, res := range served {
		lists[i] = res.listed
		for j := 0; j < i; j++ {
			if lists[j] == res.listed {
				t.Fatalf("%s shares its list with %s", res.name, served[j].name)
			}
		}
	}
	for last := range served {
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		fresh := []*listSent{newListSent(), newListSent(), newListSent(), newListSent()}
		for i := range fresh {
			if i != last {
				fresh[i].mark()
			}
		}
		if allListed(ended, fresh) {
			t.Fatalf("listed with %s's list not sent", served[last].name)
		}
		fresh[last].mark()
		if !allListed(context.Background(), fresh) {
			t.Fatalf("not listed with every list sent (%s last)", served[last].name)
		}
	}
	// Each resource's ListAndWatch, answered, marks its own list and no other.
	for i, res := range served {
		select {
		case <-res.listed.done:
			t.Fatalf("%s marked before its ListAndWatch", res.name)
		default:
		}
		stream := &listStream{ctx: context.Background(), sent: make(chan struct{})}
		go func() { _ = res.service.ListAndWatch(&pluginapi.Empty{}, stream) }() // held open until stop closes
		<-stream.sent
		eventually(t, res.name+"'s list marked", func() bool {
			select {
			case <-res.listed.done:
				return true
			default:
				return false
			}
		})
		for j := i + 1; j < len(served); j++ {
			select {
			case <-served[j].listed.done:
				t.Fatalf("%s's ListAndWatch marked %s", res.name, served[j].name)
			default:
			}
		}
	}
}

// listStream is the kubelet's side of one ListAndWatch stream, in process: it takes the first answer.
type listStream struct {
	grpc.ServerStream
	ctx  context.Context
	once sync.Once
	sent chan struct{}
}

func (s *listStream) Send(*pluginapi.ListAndWatchResponse) error {
	s.once.Do(func() { close(s.sent) })
	return nil
}

func (s *listStream) Context() context.Context { return s.ctx }
