package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// TestBadInputIsRefusedInOneLineNamingFieldValueAndFix stands for the boundary between gpulab and the program: the
// flags and the cards file gpulab writes. Each mistake ends run() with one line naming the field, the value and
// the fix, before the API server (the kubeconfig is never read: it does not exist) or the kubelet (no socket is
// made in the socket folder) is touched.
func TestBadInputIsRefusedInOneLineNamingFieldValueAndFix(t *testing.T) {
	card := `{"id": "GPU-MOCK-t-0", "index": 0, "type": "NVIDIA-A100-SXM4-80GB", "memory_mb": 81920, "cores": 100, "split_count": 10}`
	other := `{"id": "GPU-MOCK-t-1", "index": 1, "type": "NVIDIA-L4", "memory_mb": 24576, "cores": 100, "split_count": 10}`
	cases := []struct {
		name, cards, node, version string
		factor                     int64
		want                       []string
	}{
		{"unknown version", "[" + card + "]", "n", "v2.9.0", 1, []string{`--hami-version "v2.9.0"`, "pass v2.10.0", "or v2.8.3"}},
		{"version without v", "[" + card + "]", "n", "2.10.0", 1, []string{`--hami-version "2.10.0"`, "pass v2.10.0"}},
		{"no node", "[" + card + "]", "", V2100, 1, []string{"--node-name is empty", "NODE_NAME", "pass the node's name"}},
		{"empty cards", "[]", "n", V2100, 1, []string{"--cards", "empty ([])", "list at least one"}},
		{"cores 0", strings.Replace("["+card+"]", `"cores": 100`, `"cores": 0`, 1), "n", V2100, 1,
			[]string{`card #0 (id "GPU-MOCK-t-0")`, "cores 0 is not in 1..100", "100 for a whole card"}},
		{"cores 101", "[" + card + "," + strings.Replace(other, `"cores": 100`, `"cores": 101`, 1) + "]", "n", V2100, 1,
			[]string{`card #1 (id "GPU-MOCK-t-1")`, "cores 101 is not in 1..100"}},
		{"duplicate id", "[" + card + "," + strings.Replace(other, "GPU-MOCK-t-1", "GPU-MOCK-t-0", 1) + "]", "n", V2100, 1,
			[]string{`card #1: id "GPU-MOCK-t-0" is also card #0's`, "unique id"}},
		{"zero memory", strings.Replace("["+card+"]", `"memory_mb": 81920`, `"memory_mb": 0`, 1), "n", V2100, 1,
			[]string{"memory_mb 0 is not positive", "memory in MB"}},
		{"negative memory", strings.Replace("["+card+"]", `"memory_mb": 81920`, `"memory_mb": -5`, 1), "n", V2100, 1,
			[]string{"memory_mb -5 is not positive"}},
		{"fractional memory", strings.Replace("["+card+"]", `"memory_mb": 81920`, `"memory_mb": 8.5`, 1), "n", V2100, 1,
			[]string{"memory_mb", "whole numbers"}},
		{"zero split", strings.Replace("["+card+"]", `"split_count": 10`, `"split_count": 0`, 1), "n", V2100, 1,
			[]string{"split_count 0 is not positive", "deviceSplitCount"}},
		{"unknown field", strings.Replace("["+card+"]", `"cores"`, `"cores_pct"`, 1), "n", V2100, 1,
			[]string{`unknown field "cores_pct"`}},
		{"separator in id", strings.Replace("["+card+"]", "GPU-MOCK-t-0", "GPU,0", 1), "n", V2100, 1,
			[]string{`id "GPU,0" holds one of , : ;`}},
		{"MIG id", strings.Replace("["+card+"]", "GPU-MOCK-t-0", "MIG-MOCK-t-0", 1), "n", V2100, 1,
			[]string{`id "MIG-MOCK-t-0" holds "MIG"`}},
		{"duplicate index", "[" + card + "," + strings.Replace(other, `"index": 1`, `"index": 0`, 1) + "]", "n", V2100, 1,
			[]string{"index 0 is also card \"GPU-MOCK-t-0\"'s"}},
		{"factor 0", "[" + card + "]", "n", V2100, 0, []string{"--memory-factor 0 is below 1", "pass 1"}},
		// Two 80 GB cards at one device per MB: the caveat of the upstream mock plugin (devices.go kubeletMaxMessage).
		{"gpumem list too long", "[" + card + "," + strings.Replace(other, `"memory_mb": 24576`, `"memory_mb": 81920`, 1) + "]",
			"n", V2100, 1, []string{"--memory-factor 1", "163840 MB make 163840 nvidia.com/gpumem devices",
				"4194304 bytes", "pass --memory-factor 2 or more"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cards := filepath.Join(dir, "cards.json")
			if err := os.WriteFile(cards, []byte(c.cards), 0o600); err != nil {
				t.Fatal(err)
			}
			sockets := filepath.Join(dir, "device-plugins")
			if err := os.Mkdir(sockets, 0o700); err != nil {
				t.Fatal(err)
			}
			err := run(cards, c.node, filepath.Join(dir, "no-kubeconfig"), c.version, c.factor, sockets, DefaultHookPath)
			if err == nil {
				t.Fatal("accepted")
			}
			text := err.Error()
			if strings.Contains(text, "\n") || strings.Contains(text, "kubeconfig") {
				t.Fatalf("not one line about the input: %q", text)
			}
			for _, want := range c.want {
				if !strings.Contains(text, want) {
					t.Errorf("%q does not say %q", text, want)
				}
			}
			if entries, _ := os.ReadDir(sockets); len(entries) != 0 {
				t.Errorf("made %v in the socket folder", entries)
			}
		})
	}
}

// TestAMissingCardsFileIsNamed: the same boundary, a cards file gpulab did not write.
func TestAMissingCardsFileIsNamed(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "none.json"), "n", V283, 1, "/x", DefaultHookPath)
	if err == nil || !strings.Contains(err.Error(), "--cards ") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("%v", err)
	}
}

// TestGoodInputLoads: gpulab's cards file for two 80 GB cards loads at HAMi's memory factor 2 and at each release.
func TestGoodInputLoads(t *testing.T) {
	path := writeFile(t, "cards.json", cardsJSON)
	for _, version := range Versions {
		config, err := LoadConfig(path, testNode, version, 2, "/var/lib/kubelet/device-plugins", DefaultHookPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(config.Cards) != 2 || config.Cards[1].ID != "GPU-MOCK-tenant-b-1" || config.Version != version {
			t.Fatalf("%+v", config)
		}
	}
}

// TestListSizeIsProtobufsSize stands for the gRPC boundary to the kubelet: the size computed for the gpumem list is
// the size protobuf gives the real ListAndWatchResponse, and the most devices counted fit the kubelet's 4 MiB
// receive limit while one more does not.
func TestListSizeIsProtobufsSize(t *testing.T) {
	sum := func(count int64) int {
		size := 0
		for i := int64(0); i < count; i++ {
			size += entrySize(i)
		}
		return size
	}
	for _, count := range []int64{0, 1, 9, 10, 100, 1000, 12345} {
		response := &pluginapi.ListAndWatchResponse{Devices: countedDevices(count)}
		if got, want := sum(count), proto.Size(response); got != want {
			t.Fatalf("%d devices: computed %d bytes, protobuf %d", count, got, want)
		}
	}
	most := maxCountedDevices()
	fits := proto.Size(&pluginapi.ListAndWatchResponse{Devices: countedDevices(most)})
	over := proto.Size(&pluginapi.ListAndWatchResponse{Devices: countedDevices(most + 1)})
	if fits > kubeletMaxMessage || over <= kubeletMaxMessage {
		t.Fatalf("%d devices: %d bytes, %d devices: %d bytes, limit %d", most, fits, most+1, over, kubeletMaxMessage)
	}
	// The upstream caveat ("exceeding 120GB, it will display as 0"): about 113 GB fit at one device per MB.
	if most < 100_000 || most > 130_000 {
		t.Fatalf("%d devices fit", most)
	}
	t.Logf("one ListAndWatch message holds %d counted devices (%d bytes)", most, fits)
}

// TestVersionLine is what make tools checks (tools/programs.toml expect), with main.library set by -ldflags -X.
func TestVersionLine(t *testing.T) {
	saved := library
	defer func() { library = saved }()
	library = "v0.36.4"
	if got := versionLine(); got != "gpulab-hami-plugin (k8s.io/kubelet v0.36.4)" {
		t.Fatal(got)
	}
}
