package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// cardsJSON is a cards file as gpulab writes it for one node (model/catalog.py expand_cards: two A100-80GB of tenant
// "tenant-b", the default split count).
const cardsJSON = `[
  {"id": "GPU-MOCK-tenant-b-0", "index": 0, "type": "NVIDIA-A100-SXM4-80GB", "memory_mb": 81920, "cores": 100, "split_count": 10},
  {"id": "GPU-MOCK-tenant-b-1", "index": 1, "type": "NVIDIA-A100-SXM4-80GB", "memory_mb": 81920, "cores": 100, "split_count": 10}
]`

const testNode = "tenant-b-worker"

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func testCards(t *testing.T) []Card {
	t.Helper()
	cards, err := ReadCards(writeFile(t, "cards.json", cardsJSON))
	if err != nil {
		t.Fatal(err)
	}
	return cards
}

// apiPod decodes a pod from JSON, as the API server sends it (quantities in their canonical form, annotations as
// strings), so a test's pod is what HAMi's plugin reads over the wire.
func apiPod(t *testing.T, text string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(text), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// nodeWithLock is the node as HAMi's scheduler leaves it while it binds a pod: its NVIDIA plugin's register
// annotation aside, the lock hami.io/mutex.lock (pkg/util/nodelock/nodelock.go GenerateNodeLockKeyByPod:
// "<RFC 3339 time>,<namespace>,<name>"; HAMi v2.10.0's nodelock_test.go uses "2026-08-01T06:00:00Z,ns,pod-a").
func nodeWithLock(lock string) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Annotations: map[string]string{}}}
	if lock != "" {
		node.Annotations[annoNodeLock] = lock
	}
	return node
}

func lockOf(namespace, name string) string {
	return time.Now().UTC().Format(time.RFC3339) + nodeLockSep + namespace + nodeLockSep + name
}

func newClient(objects ...runtime.Object) *fake.Clientset {
	return fake.NewClientset(objects...)
}

func getPod(t *testing.T, client *fake.Clientset, namespace, name string) *corev1.Pod {
	t.Helper()
	pod, err := client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func getNode(t *testing.T, client *fake.Clientset) *corev1.Node {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
