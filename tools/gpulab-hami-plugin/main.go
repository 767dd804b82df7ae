// gpulab-hami-plugin: gpulab's HAMi device plugin for a node without GPUs, in place of HAMi's NVIDIA device plugin.
//
// It behaves towards a real kubelet and a real HAMi scheduler as HAMi's NVIDIA plugin of the tenant's release does
// (v2.10.0, or v2.8.3 with --hami-version): it registers nvidia.com/gpu (deviceSplitCount virtual devices per card),
// with nvidia.com/gpumem and nvidia.com/gpucores as HAMi's mock device plugin counts them (plugin.go, devices.go),
// writes the node's hami.io/node-nvidia-register annotation (register.go, hami.go), and answers the kubelet's
// Allocate from the pod's HAMi annotations, then marks the pod and releases the node's HAMi lock (allocate.go,
// kube.go). The cards are the ones gpulab writes for the node (--cards); nothing touches a GPU.
//
// It needs API credentials that may read the node and the pods on it and patch both (HAMi's chart grants its
// plugin these): the kubelet's own credentials may not patch a pod's annotations.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// library is the version of k8s.io/kubelet (the device plugin API) it is built with (set by make tools: -ldflags -X).
var library = "unknown"

func versionLine() string { return fmt.Sprintf("gpulab-hami-plugin (k8s.io/kubelet %s)", library) }

func main() {
	cards := flag.String("cards", "/etc/gpulab/hami-cards.json", "the node's cards, as gpulab writes them")
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "the node's name (default: $NODE_NAME)")
	kubeconfig := flag.String("kubeconfig", "", "a kubeconfig for the API server (default: the pod's in-cluster credentials)")
	hamiVersion := flag.String("hami-version", DefaultVersion, "the HAMi release whose plugin to behave as: "+V2100+" or "+V283)
	memoryFactor := flag.Int64("memory-factor", 1, "HAMi's memoryFactor: MB per nvidia.com/gpumem device")
	socketDir := flag.String("socket-dir", "/var/lib/kubelet/device-plugins", "the kubelet's device plugin folder")
	hookPath := DefaultHookPath
	if value, ok := os.LookupEnv("HOOK_PATH"); ok {
		hookPath = value
	}
	hook := flag.String("hook-path", hookPath, "HAMi's HOOK_PATH, the prefix of CUDA_DEVICE_MEMORY_SHARED_CACHE (default: $HOOK_PATH, else the chart's)")
	version := flag.Bool("version", false, "print the version and exit")
	klog.InitFlags(nil)
	flag.Parse()
	if *version {
		fmt.Println(versionLine())
		return
	}
	if err := run(*cards, *node, *kubeconfig, *hamiVersion, *memoryFactor, *socketDir, *hook); err != nil {
		fmt.Fprintf(os.Stderr, "gpulab-hami-plugin: %v\n", err)
		os.Exit(1)
	}
}

func run(cards, node, kubeconfig, hamiVersion string, memoryFactor int64, socketDir, hookPath string) error {
	// Every check first: a bad input is refused before the kubelet or the API server is touched.
	config, err := LoadConfig(cards, node, hamiVersion, memoryFactor, socketDir, hookPath)
	if err != nil {
		return err
	}
	connection, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(connection)
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
	if err := NewPlugin(config, client).Run(ctx); err != nil {
		return err
	}
	cause := context.Cause(ctx)
	klog.InfoS("stopping", "cause", cause.Error())
	if errors.Is(cause, errSignalled) {
		return nil // asked to stop (systemctl stop, the pod deleted): exit 0
	}
	return cause
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		config, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig is empty and %w: pass a kubeconfig", err)
		}
		return config, nil
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %s: pass a readable kubeconfig", kubeconfig, oneLine(err))
	}
	return config, nil
}

var errSignalled = errors.New("signalled")
