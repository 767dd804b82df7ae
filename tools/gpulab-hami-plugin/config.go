package main

// What the plugin is given (flags and the cards file gpulab writes) and its checks: every mistake is one line that
// names the field, the value and the fix, found before the plugin touches the kubelet or the API server.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
)

// The HAMi releases whose NVIDIA device plugin this program reproduces (gpulab's model/hami_releases.py).
const (
	V2100 = "v2.10.0"
	V283  = "v2.8.3"
	// DefaultVersion is a tenant's HAMi when it names none (model/hami_releases.py DEFAULT_VERSION).
	DefaultVersion = V2100
)

// Versions in the order an error lists them.
var Versions = []string{V2100, V283}

// Card is one simulated card as gpulab writes it (model/catalog.py Card): memory in MB, cores in percent of the
// card, split_count the containers that may share it (HAMi's deviceSplitCount).
type Card struct {
	ID         string `json:"id"`
	Index      int64  `json:"index"`
	Type       string `json:"type"`
	MemoryMB   int64  `json:"memory_mb"`
	Cores      int64  `json:"cores"`
	SplitCount int64  `json:"split_count"`
}

// Config is everything the plugin runs with.
type Config struct {
	Version      string
	Node         string
	Cards        []Card
	MemoryFactor int64
	SocketDir    string
	// HookPath is HAMi's HOOK_PATH (the chart's global.gpuHookPath, /usr/local at both tags): only the prefix of
	// CUDA_DEVICE_MEMORY_SHARED_CACHE here, since nothing is mounted from it (allocate.go).
	HookPath string
}

// The greatest values HAMi's register annotation can carry: DeviceInfo's count, devmem and devcore are int32
// (pkg/device/devices.go at v2.8.3 and v2.10.0).
const maxInt32 = math.MaxInt32

// CheckVersion refuses anything but the two releases, by their exact tag.
func CheckVersion(version string) error {
	for _, known := range Versions {
		if version == known {
			return nil
		}
	}
	return fmt.Errorf("--hami-version %q is not a HAMi release this plugin reproduces: pass %s (the default) or %s",
		version, V2100, V283)
}

// ReadCards reads and checks the cards file: a JSON array of cards, each field as gpulab writes it.
func ReadCards(path string) ([]Card, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cards %s: %w: pass the cards file gpulab writes for this node", path, err)
	}
	var cards []Card
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&cards); err != nil {
		return nil, fmt.Errorf("--cards %s: %s: write a JSON array of {id, index, type, memory_mb, cores, split_count} "+
			"objects with whole numbers", path, oneLine(err))
	}
	if decoder.More() {
		return nil, fmt.Errorf("--cards %s: more than one JSON value: write one array of cards", path)
	}
	if err := CheckCards(cards); err != nil {
		return nil, fmt.Errorf("--cards %s: %w", path, err)
	}
	return cards, nil
}

// CheckCards checks what HAMi's register annotation and the plugin's devices need of each card.
func CheckCards(cards []Card) error {
	if len(cards) == 0 {
		return errors.New("the list of cards is empty ([]): list at least one {id, index, type, memory_mb, cores, " +
			"split_count} (a node without cards runs no HAMi plugin)")
	}
	ids := map[string]int{}
	indexes := map[int64]string{}
	for i, card := range cards {
		name := fmt.Sprintf("card #%d (id %q)", i, card.ID)
		switch {
		case strings.TrimSpace(card.ID) == "":
			return fmt.Errorf("card #%d: id %q is empty: give each card its UUID, e.g. GPU-MOCK-<tenant>-<index>", i, card.ID)
		case strings.ContainsAny(card.ID, ",:;"):
			// The separators of HAMi's pod annotations (pkg/device/devices.go EncodeContainerDevices).
			return fmt.Errorf("%s: id %q holds one of , : ; (the separators of HAMi's pod annotations): "+
				"use letters, digits and dashes", name, card.ID)
		case strings.Contains(card.ID, "MIG"):
			// HAMi's Allocate takes a device ID holding "MIG" for a MIG instance (plugin/server.go Allocate).
			return fmt.Errorf("%s: id %q holds \"MIG\", which HAMi's plugin takes for a MIG instance (not simulated): "+
				"use an id without it", name, card.ID)
		}
		if first, ok := ids[card.ID]; ok {
			return fmt.Errorf("card #%d: id %q is also card #%d's: give each card a unique id", i, card.ID, first)
		}
		ids[card.ID] = i
		if card.Index < 0 || card.Index > maxInt32 {
			return fmt.Errorf("%s: index %d is not in 0..%d: give the card's position on the node, from 0",
				name, card.Index, maxInt32)
		}
		if other, ok := indexes[card.Index]; ok {
			return fmt.Errorf("%s: index %d is also card %q's: give each card of a node its own index",
				name, card.Index, other)
		}
		indexes[card.Index] = card.ID
		if strings.TrimSpace(card.Type) == "" {
			return fmt.Errorf("%s: type %q is empty: give the card model as HAMi registers it, e.g. NVIDIA-A100-SXM4-80GB",
				name, card.Type)
		}
		if card.MemoryMB <= 0 || card.MemoryMB > maxInt32 {
			return fmt.Errorf("%s: memory_mb %d is not positive (at most %d): give the card's memory in MB, e.g. 81920",
				name, card.MemoryMB, maxInt32)
		}
		if card.Cores < 1 || card.Cores > 100 {
			return fmt.Errorf("%s: cores %d is not in 1..100: give the card's compute in percent, 100 for a whole card",
				name, card.Cores)
		}
		if card.SplitCount < 1 || card.SplitCount > maxInt32 {
			return fmt.Errorf("%s: split_count %d is not positive: give how many containers may share the card "+
				"(HAMi's deviceSplitCount, 10 by default)", name, card.SplitCount)
		}
	}
	return nil
}

// CheckMemoryFactor refuses a factor below 1 and one that leaves the gpumem device list too long for the kubelet to
// receive (devices.go gpumemDevices).
func CheckMemoryFactor(cards []Card, factor int64) error {
	if factor < 1 {
		return fmt.Errorf("--memory-factor %d is below 1: pass 1 (one nvidia.com/gpumem device per MB) or HAMi's "+
			"memoryFactor of the tenant", factor)
	}
	total := totalMemory(cards)
	count := total / factor
	if most := maxCountedDevices(); count > most {
		// The least factor f with total/f <= most.
		least := total/(most+1) + 1
		return fmt.Errorf("--memory-factor %d: the node's %d MB make %d nvidia.com/gpumem devices, more than the %d "+
			"one ListAndWatch message to the kubelet holds (%d bytes): pass --memory-factor %d or more, and the same "+
			"memoryFactor to HAMi", factor, total, count, most, kubeletMaxMessage, least)
	}
	return nil
}

// CheckNode refuses an empty node name.
func CheckNode(node string) error {
	if strings.TrimSpace(node) == "" {
		return errors.New("--node-name is empty and NODE_NAME is unset: pass the node's name as its kubelet registers it")
	}
	return nil
}

// LoadConfig reads and checks everything, in the order the flags are listed in main.go.
func LoadConfig(cardsPath, node, version string, memoryFactor int64, socketDir, hookPath string) (Config, error) {
	if err := CheckVersion(version); err != nil {
		return Config{}, err
	}
	if err := CheckNode(node); err != nil {
		return Config{}, err
	}
	if strings.TrimSpace(socketDir) == "" {
		return Config{}, errors.New("--socket-dir is empty: pass the kubelet's device plugin folder, " +
			"/var/lib/kubelet/device-plugins")
	}
	cards, err := ReadCards(cardsPath)
	if err != nil {
		return Config{}, err
	}
	if err := CheckMemoryFactor(cards, memoryFactor); err != nil {
		return Config{}, err
	}
	return Config{Version: version, Node: node, Cards: cards, MemoryFactor: memoryFactor, SocketDir: socketDir,
		HookPath: hookPath}, nil
}

func totalMemory(cards []Card) int64 {
	var total int64
	for _, card := range cards {
		total += card.MemoryMB
	}
	return total
}

// oneLine keeps an error to one line (the plugin's errors are one line each).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
