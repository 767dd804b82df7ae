// gpulab-dra-plugin: the DRA kubelet plugin of gpulab's simulated cards (driver gpu.gpulab.io) on a real node.
//
// It registers with the node's kubelet, publishes the node's cards as a ResourceSlice (the kubelet removes a node's
// slices of a driver that is not registered, so the driver on the node publishes them: kubernetes v1.36.4
// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, wipeResourceSlices), and prepares and unprepares claims
// (driver.go). It talks to the API server with the kubelet's own credentials: the Node authorizer lets a node
// write its own ResourceSlices and read the claims of its pods.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// library is the version of k8s.io/dynamic-resource-allocation it is built with (set by make tools: -ldflags -X).
var library = "unknown"

func main() {
	devicesFile := flag.String("devices", "/etc/gpulab/dra/devices.json", "the node's cards, as gpulab writes them")
	kubeconfig := flag.String("kubeconfig", "/etc/kubernetes/kubelet.conf", "the kubelet's kubeconfig")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where prepared claims' CDI specs are written")
	version := flag.Bool("version", false, "print the version and exit")
	klog.InitFlags(nil)
	flag.Parse()
	if *version {
		fmt.Printf("gpulab-dra-plugin (k8s.io/dynamic-resource-allocation %s)\n", library)
		return
	}
	if err := run(*devicesFile, *kubeconfig, *cdiDir); err != nil {
		fmt.Fprintf(os.Stderr, "gpulab-dra-plugin: %v\n", err)
		os.Exit(1)
	}
}

func run(devicesFile, kubeconfig, cdiDir string) error {
	devices, err := ReadNodeDevices(devicesFile)
	if err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		received := <-signals
		stop(fmt.Errorf("%w: %v", errSignalled, received))
	}()
	// The helper listens in the kubelet's folder for the driver's plugin, which a DaemonSet's hostPath volume would
	// create (DirectoryOrCreate); run by the node's own systemd, the plugin makes it (seen: "bind: no such file or
	// directory" without it, kubelet v1.36.4).
	if err := os.MkdirAll(filepath.Join(kubeletplugin.KubeletPluginsDir, devices.Driver), 0o750); err != nil {
		return err
	}
	driver := &Driver{devices: devices, cdiDir: cdiDir, stop: stop}
	helper, err := kubeletplugin.Start(ctx, driver,
		kubeletplugin.KubeClient(client),
		kubeletplugin.DriverName(devices.Driver),
		kubeletplugin.NodeName(devices.Node),
	)
	if err != nil {
		return fmt.Errorf("registering with the kubelet: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, devices.Resources()); err != nil {
		return fmt.Errorf("publishing the node's devices: %w", err)
	}
	klog.InfoS("serving", "driver", devices.Driver, "node", devices.Node, "devices", len(devices.Devices))
	<-ctx.Done()
	cause := context.Cause(ctx)
	klog.InfoS("stopping", "cause", cause.Error())
	if errors.Is(cause, errSignalled) {
		return nil // asked to stop (systemctl stop): exit 0
	}
	return cause // a fatal error (HandleError): exit 1, so the unit shows the failure
}

var errSignalled = errors.New("signalled")
