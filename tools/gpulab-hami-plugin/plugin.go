package main

// The plugin's life beside the kubelet: serve the three resources on sockets in the kubelet's device plugin folder,
// register each with the kubelet, start the node registrar, and start all of it again when the kubelet restarts
// (the kubelet then recreates its socket and forgets every plugin) or when a start failed (30 s later), as HAMi's
// plugin does (cmd/device-plugin/nvidia/main.go start: an inotify watch of the kubelet socket's creation, and
// "Retrying in 30s"); here the socket's identity (device, inode and modification time) is polled instead of watched
// with inotify.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kubeletSocketName is the kubelet's registration socket in its device plugin folder (deviceplugin/v1beta1
// constants.go KubeletSocket).
const kubeletSocketName = "kubelet.sock"

// Plugin runs the three device plugins of a node.
type Plugin struct {
	Config Config
	Client kubernetes.Interface
	// RestartAfter is how long after a failed start the plugins are started again (30 s, main.go of HAMi's plugin);
	// WatchEvery how often the kubelet's socket is looked at; RegisterPeriod and RegisterRetry the registrar's
	// periods (register.go). Tests shorten them.
	RestartAfter   time.Duration
	WatchEvery     time.Duration
	RegisterPeriod time.Duration
	RegisterRetry  time.Duration
	newUUID        func() string
}

// NewPlugin is a Plugin with HAMi's periods.
func NewPlugin(config Config, client kubernetes.Interface) *Plugin {
	return &Plugin{Config: config, Client: client, RestartAfter: 30 * time.Second, WatchEvery: time.Second,
		RegisterPeriod: registerPeriod, RegisterRetry: registerRetryAfter, newUUID: newUUID}
}

// served is one served resource: its name, socket file, gRPC service, and whether the kubelet has its list.
type served struct {
	name    string
	socket  string
	service pluginapi.DevicePluginServer
	listed  *listSent
}

// resources builds the four plugins, fresh for each start (as HAMi's plugins are made anew on a restart).
// The socket of nvidia.com/gpu is HAMi's ("nvidia-" + the resource's name, plugin/server.go); the others follow it.
func (p *Plugin) resources(stop <-chan struct{}) []served {
	cards := p.Config.Cards
	lists := []*listSent{newListSent(), newListSent(), newListSent(), newListSent()}
	gpu := &gpuPlugin{version: p.Config.Version, api: newHamiAPI(p.Config.Version, p.Config.Node, p.Client),
		devices: gpuDevices(cards), hookPath: p.Config.HookPath, newUUID: p.newUUID, stop: stop, listed: lists[0]}
	counted := func(devices []*pluginapi.Device, listed *listSent) *countedPlugin {
		return &countedPlugin{devices: devices, stop: stop, listed: listed}
	}
	return []served{
		{ResourceGPU, "nvidia-gpu.sock", gpu, lists[0]},
		{ResourceGPUMem, "nvidia-gpumem.sock", counted(gpumemDevices(cards, p.Config.MemoryFactor), lists[1]), lists[1]},
		{ResourceGPUCores, "nvidia-gpucores.sock", counted(gpucoresDevices(cards), lists[2]), lists[2]},
		{ResourceGPUMemPercentage, "nvidia-gpumem-percentage.sock", counted(gpumemPercentageDevices(cards), lists[3]), lists[3]},
	}
}

// running is one start of the plugins.
type running struct {
	stop     chan struct{}
	servers  []*grpc.Server
	sockets  []string
	cancel   context.CancelFunc
	finished chan struct{}
}

func (r *running) close() {
	if r.cancel != nil {
		r.cancel()
		<-r.finished
	}
	close(r.stop)
	for _, server := range r.servers {
		server.Stop()
	}
	for _, socket := range r.sockets {
		if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "removing the plugin's socket", "socket", socket)
		}
	}
}

// start serves and registers the four resources, then starts the registrar; on an error it undoes what it did.
// The registrar writes the node's register annotation only once every resource's first list was sent to the
// kubelet, so that the annotation HAMi's scheduler places by (and gpulab's start waits for, having removed a former
// one) does not come before the devices a pod's admission looks for. HAMi's plugin writes it right after its
// registration (plugin/server.go WatchAndRegister at both tags); the gate narrows that window (a sent list is not
// yet a processed one) and changes nothing else HAMi sees.
func (p *Plugin) start(ctx context.Context) (*running, error) {
	r := &running{stop: make(chan struct{})}
	kubelet := filepath.Join(p.Config.SocketDir, kubeletSocketName)
	annotation, err := RegisterAnnotation(p.Config.Version, p.Config.Cards)
	if err != nil {
		return nil, err
	}
	var lists []*listSent
	for _, res := range p.resources(r.stop) {
		socket := filepath.Join(p.Config.SocketDir, res.socket)
		if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.close()
			return nil, err
		}
		listener, err := net.Listen("unix", socket)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("serving %s on %s: %w", res.name, socket, err)
		}
		server := grpc.NewServer()
		pluginapi.RegisterDevicePluginServer(server, res.service)
		r.servers = append(r.servers, server)
		r.sockets = append(r.sockets, socket)
		go func() {
			if err := server.Serve(listener); err != nil {
				klog.ErrorS(err, "the plugin's gRPC server ended", "resource", res.name)
			}
		}()
		if err := register(ctx, kubelet, res.name, res.socket); err != nil {
			r.close()
			return nil, fmt.Errorf("registering %s with the kubelet at %s: %w", res.name, kubelet, err)
		}
		klog.InfoS("registered with the kubelet", "resource", res.name, "socket", socket)
		lists = append(lists, res.listed)
	}
	reg := &registrar{node: p.Config.Node, client: p.Client, annotation: annotation,
		period: p.RegisterPeriod, retry: p.RegisterRetry}
	registering, cancel := context.WithCancel(ctx)
	r.cancel, r.finished = cancel, make(chan struct{})
	go func() {
		defer close(r.finished)
		if allListed(registering, lists) {
			klog.InfoS("every resource's first device list was sent to the kubelet: registering the node's cards")
			reg.run(registering)
		}
	}()
	return r, nil
}

// register asks the kubelet to take the plugin (HAMi plugin/server.go Register: version v1beta1, the socket's name
// in the kubelet's folder, GetPreferredAllocationAvailable false in the request at both tags).
func register(ctx context.Context, kubelet, resourceName, socket string) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	call, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(call, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     socket,
		ResourceName: resourceName,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	return err
}

// Run starts the plugins and keeps them registered until ctx ends.
func (p *Plugin) Run(ctx context.Context) error {
	kubelet := filepath.Join(p.Config.SocketDir, kubeletSocketName)
	for {
		seen, _ := os.Stat(kubelet)
		current, err := p.start(ctx)
		var retry <-chan time.Time
		if err != nil {
			klog.ErrorS(err, "starting the plugins; retrying", "after", p.RestartAfter)
			retry = time.After(p.RestartAfter)
		} else {
			klog.InfoS("serving", "node", p.Config.Node, "hamiVersion", p.Config.Version, "cards", len(p.Config.Cards))
		}
		restart := p.watch(ctx, kubelet, seen, retry)
		if current != nil {
			current.close()
		}
		if !restart {
			return nil
		}
	}
}

// watch waits for the kubelet's socket to be made anew (its identity differs from `seen`), for `retry`, or for the
// end of ctx (false).
func (p *Plugin) watch(ctx context.Context, kubelet string, seen os.FileInfo, retry <-chan time.Time) bool {
	ticker := time.NewTicker(p.WatchEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-retry:
			return true
		case <-ticker.C:
			now, err := os.Stat(kubelet)
			if err == nil && (seen == nil || !sameSocket(seen, now)) {
				klog.InfoS("the kubelet's socket was created: restarting the plugins", "socket", kubelet)
				return true
			}
			if err != nil {
				seen = nil // the kubelet is gone: its next socket is new whatever its inode
			}
		}
	}
}

// sameSocket: the same file, not made anew. A kubelet's new socket may get the inode of the one it removed (the
// kubelet removes and remakes it at once), but not its modification time.
func sameSocket(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}
