// Command device-plugin-config loads one NVIDIA device-plugin config with the plugin's own config API
// (github.com/NVIDIA/k8s-device-plugin v0.17.4, api/config/v1) and prints, as JSON, what the plugin would advertise
// on a node whose GPUs are described in --node: resource names and counts, per GPU and in all, and the settings that
// decide them (MIG strategy, sharing strategy, renameByDefault, failRequestsGreaterThanOne).
//
// Usage: device-plugin-config --config-file FILE|- --node FILE|JSON
//
// The config is loaded as the plugin's startPlugins loads it (cmd/nvidia-device-plugin/main.go): spec.NewConfig over
// a cli.Context built from the plugin's own flags and environment variables (MIG_STRATEGY, MPS_ROOT, ... as the
// GPU Operator sets them on the DaemonSet), then spec.DisableResourceNamingInConfig, then the checks of validateFlags
// that do not need NVML. The counting that follows is the smallest faithful rendering of internal/rm, which cannot be
// imported from outside the module; each step names the upstream function it follows. A config the plugin refuses
// exits 1 with the plugin's own error, wrapped as the plugin wraps it.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
)

// GPU is one physical GPU of the node: its product name (as NVML reports it; GFD's nvidia.com/gpu.product), for a
// GPU in MIG mode its MIG devices by profile (MIG nil: MIG disabled; MIG {}: enabled with no devices), and for a
// MIG-capable GPU the GPU-instance profiles it supports, in NVML's profile index order.
type GPU struct {
	Product     string         `json:"product"`
	MIG         map[string]int `json:"mig"`
	MigProfiles []string       `json:"migProfiles"`
}

// Node is the --node input.
type Node struct {
	GPUs []GPU `json:"gpus"`
}

// Result is what the plugin would advertise.
type Result struct {
	MigStrategy                string           `json:"migStrategy"`
	SharingStrategy            string           `json:"sharingStrategy"`
	RenameByDefault            bool             `json:"renameByDefault"`
	FailRequestsGreaterThanOne bool             `json:"failRequestsGreaterThanOne"`
	Renamed                    bool             `json:"renamed"`
	Resources                  map[string]int   `json:"resources"`
	PerGPU                     []map[string]int `json:"perGPU"`
	Replicated                 []Replicated     `json:"replicated"`
	Warnings                   []string         `json:"warnings"`
}

// Replicated is one entry of the active sharing section as the plugin runs it (rename and devices after
// DisableResourceNamingInConfig).
type Replicated struct {
	Name     string `json:"name"`
	Rename   string `json:"rename"`
	Replicas int    `json:"replicas"`
}

// pluginFlags are the plugin's own flags, copied from cmd/nvidia-device-plugin/main.go (package main, not
// importable): names, defaults and environment variables as v0.17.4 declares them, so that spec.NewConfig and
// Flags.UpdateFromCLIFlags see the same cli.Context the plugin builds. Flags that only steer the gRPC server
// (kubelet-socket) are left out: they never reach the config.
func pluginFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone, EnvVars: []string{"MIG_STRATEGY"}},
		&cli.BoolFlag{Name: "fail-on-init-error", Value: true, EnvVars: []string{"FAIL_ON_INIT_ERROR"}},
		&cli.StringFlag{Name: "driver-root", Aliases: []string{"nvidia-driver-root"}, Value: "/",
			EnvVars: []string{"NVIDIA_DRIVER_ROOT"}},
		&cli.StringFlag{Name: "dev-root", Aliases: []string{"nvidia-dev-root"}, EnvVars: []string{"NVIDIA_DEV_ROOT"}},
		&cli.BoolFlag{Name: "pass-device-specs", Value: false, EnvVars: []string{"PASS_DEVICE_SPECS"}},
		&cli.StringSliceFlag{Name: "device-list-strategy", Value: cli.NewStringSlice(spec.DeviceListStrategyEnvVar),
			EnvVars: []string{"DEVICE_LIST_STRATEGY"}},
		&cli.StringFlag{Name: "device-id-strategy", Value: spec.DeviceIDStrategyUUID,
			EnvVars: []string{"DEVICE_ID_STRATEGY"}},
		&cli.BoolFlag{Name: "gds-enabled", EnvVars: []string{"GDS_ENABLED"}},
		&cli.BoolFlag{Name: "mofed-enabled", EnvVars: []string{"MOFED_ENABLED"}},
		&cli.StringFlag{Name: "config-file", EnvVars: []string{"CONFIG_FILE"}},
		&cli.StringFlag{Name: "cdi-annotation-prefix", Value: spec.DefaultCDIAnnotationPrefix,
			EnvVars: []string{"CDI_ANNOTATION_PREFIX"}},
		&cli.StringFlag{Name: "nvidia-cdi-hook-path", Aliases: []string{"nvidia-ctk-path"}, Value: spec.DefaultNvidiaCTKPath,
			EnvVars: []string{"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"}},
		&cli.StringFlag{Name: "driver-root-ctr-path", Aliases: []string{"container-driver-root"},
			Value: spec.DefaultContainerDriverRoot, EnvVars: []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}},
		&cli.StringFlag{Name: "mps-root", EnvVars: []string{"MPS_ROOT"}},
		&cli.StringFlag{Name: "device-discovery-strategy", Value: "auto", EnvVars: []string{"DEVICE_DISCOVERY_STRATEGY"}},
		&cli.IntSliceFlag{Name: "imex-channel-ids", EnvVars: []string{"IMEX_CHANNEL_IDS"}},
		&cli.BoolFlag{Name: "imex-required", EnvVars: []string{"IMEX_REQUIRED"}},
	}
}

type warnings struct{ list []string }

func (w *warnings) Warning(args ...interface{}) { w.list = append(w.list, fmt.Sprint(args...)) }
func (w *warnings) Warningf(format string, args ...interface{}) {
	w.list = append(w.list, fmt.Sprintf(format, args...))
}

func main() {
	flags := pluginFlags()
	app := cli.NewApp()
	app.Name = "device-plugin-config"
	app.Usage = "what the NVIDIA device plugin v0.17.4 advertises with a config on a node"
	app.Flags = append(append([]cli.Flag{}, flags...),
		&cli.StringFlag{Name: "node", Usage: "the node's GPUs: a JSON file, or the JSON itself", Required: true})
	app.Action = func(c *cli.Context) error {
		node, err := readNode(c.String("node"))
		if err != nil {
			return err
		}
		result, err := advertise(c, flags, node)
		if err != nil {
			return fmt.Errorf("error starting plugins: %v", err) // cmd/nvidia-device-plugin/main.go start
		}
		out, _ := json.MarshalIndent(result, "", "  ")
		fmt.Println(string(out))
		return nil
	}
	if len(os.Args) > 2 && os.Args[1] == "--config-file" && os.Args[2] == "-" {
		path, err := stdinToFile()
		if err != nil {
			fail(err)
		}
		defer os.Remove(path)
		os.Args[2] = path
	}
	if err := app.Run(os.Args); err != nil {
		fail(err)
	}
}

func fail(err error) {
	out, _ := json.Marshal(map[string]string{"error": err.Error()})
	fmt.Println(string(out))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// stdinToFile: spec.NewConfig reads the config from a path only.
func stdinToFile() (string, error) {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "device-plugin-config-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(data)
	return f.Name(), err
}

func readNode(arg string) (*Node, error) {
	data := []byte(arg)
	if !strings.HasPrefix(strings.TrimSpace(arg), "{") {
		var err error
		if data, err = os.ReadFile(arg); err != nil {
			return nil, fmt.Errorf("--node: %v", err)
		}
	}
	var node Node
	if err := json.Unmarshal(data, &node); err != nil {
		return nil, fmt.Errorf("--node: %v", err)
	}
	return &node, nil
}

// advertise follows startPlugins in cmd/nvidia-device-plugin/main.go up to the plugins it would start.
func advertise(c *cli.Context, flags []cli.Flag, node *Node) (*Result, error) {
	// loadConfig: spec.NewConfig, errors wrapped as startPlugins wraps them.
	config, err := spec.NewConfig(c, flags)
	if err != nil {
		return nil, fmt.Errorf("unable to load config: unable to finalize config: %v", err)
	}
	config.Flags.GFD = nil
	w := &warnings{}
	spec.DisableResourceNamingInConfig(w, config)
	if err := validateFlags(config); err != nil {
		return nil, fmt.Errorf("unable to validate flags: %v", err)
	}
	addDefaultResourcesToConfig(config, node)
	devices, err := buildDeviceMap(config, node)
	if err != nil {
		return nil, fmt.Errorf("error getting plugins: unable to create plugins: "+
			"failed to construct resource managers: error building device map: %v", err)
	}
	// internal/plugin/mps.go getMPSOptions: a resource that holds a MIG device cannot be shared with MPS.
	if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
		for _, ds := range devices {
			for _, d := range ds {
				if d.mig {
					return nil, fmt.Errorf("error getting plugins: unable to create plugins: " +
						"failed to create plugin: sharing using MPS is not supported for MIG devices")
				}
			}
		}
	}
	return summarise(config, node, devices, w.list), nil
}

// validateFlags is the part of validateFlags (cmd/nvidia-device-plugin/main.go) that needs no NVML: the CDI check
// (CDI strategies need an NVML system) is left out, since the checker runs where no GPU is.
func validateFlags(config *spec.Config) error {
	if _, err := spec.NewDeviceListStrategies(*config.Flags.Plugin.DeviceListStrategy); err != nil {
		return fmt.Errorf("invalid --device-list-strategy option: %v", err)
	}
	if s := *config.Flags.Plugin.DeviceIDStrategy; s != spec.DeviceIDStrategyUUID && s != spec.DeviceIDStrategyIndex {
		return fmt.Errorf("invalid --device-id-strategy option: %v", s)
	}
	if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
		if *config.Flags.MigStrategy == spec.MigStrategyMixed {
			return fmt.Errorf("using --mig-strategy=mixed is not supported with MPS")
		}
		if config.Flags.MpsRoot == nil || *config.Flags.MpsRoot == "" {
			return fmt.Errorf("using MPS requires --mps-root to be specified")
		}
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	switch *config.Flags.MigStrategy {
	case spec.MigStrategyNone, spec.MigStrategySingle, spec.MigStrategyMixed:
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *config.Flags.MigStrategy)
	}
	if err := spec.AssertChannelIDsValid(config.Imex.ChannelIDs); err != nil {
		return fmt.Errorf("invalid IMEX channel IDs: %w", err)
	}
	return nil
}

// addDefaultResourcesToConfig follows rm.AddDefaultResourcesToConfig (internal/rm/rm.go). For mixed, upstream names
// a resource after every MIG profile of the node's GPUs (devicelib.VisitMigProfiles, go-nvlib pkg/nvlib/device: per
// GPU, GPU-instance profiles in NVML's index order, each profile once) whose compute instances equal its GPU
// instances: --node gives those profiles per GPU in that order (migProfiles). The order decides names, since a
// pattern matches anywhere in a profile (api/config/v1 ResourcePattern.Matches is not anchored): "1g.10gb", visited
// before "1g.10gb+me", also takes the +me devices (k8s-device-plugin#1462, fixed after v0.17.4 by #1807).
func addDefaultResourcesToConfig(config *spec.Config, node *Node) {
	_ = config.Resources.AddGPUResource("*", "gpu")
	switch *config.Flags.MigStrategy {
	case spec.MigStrategySingle:
		_ = config.Resources.AddMIGResource("*", "gpu")
	case spec.MigStrategyMixed:
		visited := map[string]bool{}
		for _, gpu := range node.GPUs {
			profiles := gpu.MigProfiles
			if profiles == nil { // a GPU described without its profiles: those its MIG devices use
				profiles = sortedKeys(gpu.MIG)
			}
			for _, profile := range profiles {
				if !visited[profile] {
					visited[profile] = true
					_ = config.Resources.AddMIGResource(profile, strings.ReplaceAll("mig-"+profile, "+", "."))
				}
			}
		}
	}
}

type device struct {
	gpu      int
	mig      bool
	replicas int
}

// deviceMap is rm.DeviceMap reduced to what counting needs: resource name -> device ID -> device.
type deviceMap map[string]map[string]device

func (d deviceMap) insert(name, id string, dev device) {
	if d[name] == nil {
		d[name] = map[string]device{}
	}
	d[name][id] = dev
}

// buildDeviceMap follows deviceMapBuilder.build (internal/rm/device_map.go): buildDeviceMapFromConfigResources,
// then updateDeviceMapWithReplicas. Device IDs are the plugin's indices ("i" for a GPU, "i:j" for a MIG device).
func buildDeviceMap(config *spec.Config, node *Node) (deviceMap, error) {
	strategy := *config.Flags.MigStrategy
	devices := deviceMap{}
	// buildGPUDeviceMap: a GPU in MIG mode is a whole GPU only under strategy none.
	for i, gpu := range node.GPUs {
		if gpu.MIG != nil && strategy != spec.MigStrategyNone {
			continue
		}
		name := matchResource(config.Resources.GPUs, gpu.Product)
		if name == "" {
			return nil, fmt.Errorf("error building device map from config.resources: error building GPU device map: "+
				"GPU name '%v' does not match any resource patterns", gpu.Product)
		}
		devices.insert(name, strconv.Itoa(i), device{gpu: i})
	}
	if strategy != spec.MigStrategyNone {
		migDevices := deviceMap{}
		// buildMigDeviceMap: every MIG device by its profile; j numbers a GPU's MIG devices, profiles in order.
		for i, gpu := range node.GPUs {
			j := 0
			for _, profile := range sortedKeys(gpu.MIG) {
				name := matchResource(config.Resources.MIGs, profile)
				if name == "" {
					return nil, fmt.Errorf("error building device map from config.resources: error building MIG device "+
						"map: MIG profile '%v' does not match any resource patterns", profile)
				}
				for n := 0; n < gpu.MIG[profile]; n++ {
					migDevices.insert(name, fmt.Sprintf("%d:%d", i, j), device{gpu: i, mig: true})
					j++
				}
			}
		}
		uniform := strategy == spec.MigStrategySingle
		if err := assertAllMigDevicesAreValid(node, uniform); err != nil {
			return nil, fmt.Errorf("error building device map from config.resources: invalid MIG configuration: %v", err)
		}
		if uniform && !devices.isEmpty() && !migDevices.isEmpty() {
			return nil, fmt.Errorf("error building device map from config.resources: " +
				"all devices on the node must be configured with the same migEnabled value")
		}
		for name, ds := range migDevices {
			for id, d := range ds {
				devices.insert(name, id, d)
			}
		}
	}
	return updateDeviceMapWithReplicas(config.Sharing.ReplicatedResources(), devices), nil
}

func matchResource(resources []spec.Resource, s string) string {
	for _, r := range resources {
		if r.Pattern.Matches(s) {
			return string(r.Name)
		}
	}
	return ""
}

// assertAllMigDevicesAreValid follows deviceMapBuilder.assertAllMigDevicesAreValid; two MIG devices of one profile
// have equal attributes, so "the same attributes" is "the same profile" here.
func assertAllMigDevicesAreValid(node *Node, uniform bool) error {
	for i, gpu := range node.GPUs {
		if gpu.MIG != nil && uniform && total(gpu.MIG) == 0 {
			return fmt.Errorf("at least one device with migEnabled=true was not configured correctly: "+
				"device %v has no MIG devices configured", i)
		}
	}
	if !uniform {
		return nil
	}
	profiles := map[string]bool{}
	for _, gpu := range node.GPUs {
		for profile, n := range gpu.MIG {
			if n > 0 {
				profiles[profile] = true
			}
		}
	}
	if len(profiles) > 1 {
		return fmt.Errorf("more than one MIG device type present on node")
	}
	return nil
}

func (d deviceMap) isEmpty() bool {
	for _, ds := range d {
		if len(ds) > 0 {
			return false
		}
	}
	return true
}

// updateDeviceMapWithReplicas follows the function of that name in internal/rm/device_map.go. After
// DisableResourceNamingInConfig every resource replicates all its devices (devices: all) and Rename is either ""
// or <name>.shared, so getIDsOfDevicesToReplicate's count and list branches are never taken.
func updateDeviceMapWithReplicas(rrs *spec.ReplicatedResources, devices deviceMap) deviceMap {
	out := deviceMap{}
	names := map[string]bool{}
	for _, r := range rrs.Resources {
		names[string(r.Name)] = true
	}
	for name, ds := range devices {
		if !names[name] {
			out[name] = ds
		}
	}
	for _, r := range rrs.Resources {
		ds := devices[string(r.Name)]
		if len(ds) == 0 { // resources not matched on the node are skipped
			continue
		}
		name := string(r.Name)
		if r.Rename != "" {
			name = string(r.Rename)
		}
		for id, d := range ds {
			for i := 0; i < r.Replicas; i++ {
				d.replicas = r.Replicas
				out.insert(name, fmt.Sprintf("%s::%d", id, i), d) // rm.NewAnnotatedID
			}
		}
	}
	return out
}

// summarise: one plugin per resource (rm.NewNVMLResourceManagers skips a resource with no devices), each
// advertising its devices to the kubelet.
func summarise(config *spec.Config, node *Node, devices deviceMap, warnings []string) *Result {
	rrs := config.Sharing.ReplicatedResources()
	result := &Result{
		MigStrategy:                *config.Flags.MigStrategy,
		SharingStrategy:            string(config.Sharing.SharingStrategy()),
		RenameByDefault:            rrs.RenameByDefault,
		FailRequestsGreaterThanOne: rrs.FailRequestsGreaterThanOne,
		Resources:                  map[string]int{},
		PerGPU:                     make([]map[string]int, len(node.GPUs)),
		Replicated:                 []Replicated{},
		Warnings:                   warnings,
	}
	if result.Warnings == nil {
		result.Warnings = []string{}
	}
	for i := range result.PerGPU {
		result.PerGPU[i] = map[string]int{}
	}
	for _, r := range rrs.Resources {
		if r.Rename != "" && r.Rename != r.Name {
			result.Renamed = true
		}
		result.Replicated = append(result.Replicated, Replicated{string(r.Name), string(r.Rename), r.Replicas})
	}
	for name, ds := range devices {
		if len(ds) == 0 {
			continue
		}
		result.Resources[name] = len(ds)
		for _, d := range ds {
			result.PerGPU[d.gpu][name]++
		}
	}
	return result
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
