package sshhost

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// gpuSeen is what nvidia-smi, amd-smi or rocm-smi reported on a host.
type gpuSeen struct {
	Tool   string   // the tool read, named in the order's notes
	Names  []string // one per GPU, in index order
	Memory []string // nvidia-smi only
	Driver string
	CUDA   string // the compute stack: CUDA version, or "ROCm x.y" on AMD
}

// verifyScript prints the GPU query, then the nvidia-smi header (for the
// CUDA version the driver supports), then nvcc's version if installed.
const verifyScript = `set -u
echo '--- query'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || exit 3
echo '--- header'
nvidia-smi 2>/dev/null | head -n 6 || true
echo '--- nvcc'
nvcc --version 2>/dev/null || true
`

var (
	cudaHeaderRE = regexp.MustCompile(`CUDA Version:\s*([0-9][0-9.]*)`)
	nvccRE       = regexp.MustCompile(`release ([0-9][0-9.]*)`)
)

// parseVerify reads verifyScript's output.
func parseVerify(out string) (gpuSeen, error) {
	sections := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "--- "); ok {
			cur = name
			continue
		}
		if strings.TrimSpace(line) != "" {
			sections[cur] = append(sections[cur], line)
		}
	}
	g := gpuSeen{Tool: "nvidia-smi"}
	for _, line := range sections["query"] {
		fields := strings.Split(line, ",")
		if len(fields) != 3 {
			return gpuSeen{}, fmt.Errorf("unexpected nvidia-smi line %q", line)
		}
		g.Names = append(g.Names, strings.TrimSpace(fields[0]))
		g.Memory = append(g.Memory, strings.TrimSpace(fields[1]))
		drv := strings.TrimSpace(fields[2])
		if g.Driver != "" && g.Driver != drv {
			return gpuSeen{}, fmt.Errorf("GPUs report different drivers: %s and %s", g.Driver, drv)
		}
		g.Driver = drv
	}
	if len(g.Names) == 0 {
		return gpuSeen{}, fmt.Errorf("nvidia-smi lists no GPU")
	}
	if m := cudaHeaderRE.FindStringSubmatch(strings.Join(sections["header"], "\n")); m != nil {
		g.CUDA = m[1]
	} else if m := nvccRE.FindStringSubmatch(strings.Join(sections["nvcc"], "\n")); m != nil {
		g.CUDA = m[1] + " (nvcc)"
	} else {
		g.CUDA = "inconnue"
	}
	return g, nil
}

// model returns the GPU name if all GPUs carry the same one, else a list.
func (g gpuSeen) model() string {
	for _, n := range g.Names[1:] {
		if n != g.Names[0] {
			return strings.Join(g.Names, " + ")
		}
	}
	return g.Names[0]
}

// mismatch explains how g differs from want GPUs matching pattern ("" if not).
func (g gpuSeen) mismatch(pattern *regexp.Regexp, wantModel string, wantCount int) string {
	for _, n := range g.Names {
		if !pattern.MatchString(n) {
			return fmt.Sprintf("modèle %q au lieu de %s", n, wantModel)
		}
	}
	if len(g.Names) != wantCount {
		return fmt.Sprintf("%d GPU au lieu de %d", len(g.Names), wantCount)
	}
	return ""
}

// amdVerifyScript prints amd-smi's static ASIC and driver sections (one
// "GPU: N" block per GPU) or, on older ROCm releases that ship rocm-smi
// only, rocm-smi's product names and driver version; then the ROCm release
// installed. ROCm keeps its tools in /opt/rocm/bin, which only login shells
// put on PATH.
const amdVerifyScript = `set -u
PATH="$PATH:/opt/rocm/bin"
if command -v amd-smi >/dev/null 2>&1; then
	echo '--- amd-smi'
	amd-smi static --asic --driver || exit 3
elif command -v rocm-smi >/dev/null 2>&1; then
	echo '--- rocm-smi product'
	rocm-smi --showproductname || exit 3
	echo '--- rocm-smi driver'
	rocm-smi --showdriverversion || true
else
	echo 'neither amd-smi nor rocm-smi on this host' >&2
	exit 3
fi
echo '--- rocm'
cat /opt/rocm/.info/version 2>/dev/null || true
`

// parseAMDVerify reads amdVerifyScript's output, from whichever tool ran.
func parseAMDVerify(out string) (gpuSeen, error) {
	g := gpuSeen{Tool: "amd-smi"}
	var rocmSMI rocmSMIOutput
	section, block := "", ""
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(raw)
		if name, ok := strings.CutPrefix(raw, "--- "); ok {
			section = name
			if strings.HasPrefix(name, "rocm-smi") {
				g.Tool = "rocm-smi"
			}
			continue
		}
		switch {
		case line == "":
		case section == "rocm":
			if g.CUDA == "" {
				g.CUDA = "ROCm " + line
			}
		case section == "rocm-smi product":
			rocmSMI.productLine(line)
		case section == "rocm-smi driver":
			if key, val, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(key), "Driver version") {
				g.Driver = strings.TrimSpace(val)
			}
		case section != "amd-smi":
		case strings.HasPrefix(raw, "GPU:"):
			g.Names = append(g.Names, "")
		case strings.HasSuffix(line, ":") && !strings.Contains(strings.TrimSuffix(line, ":"), ":"):
			block = strings.TrimSuffix(line, ":")
		default:
			key, val, ok := strings.Cut(line, ":")
			if !ok || len(g.Names) == 0 {
				continue
			}
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			switch {
			case block == "ASIC" && key == "MARKET_NAME":
				g.Names[len(g.Names)-1] = val
			case block == "DRIVER" && key == "VERSION":
				if g.Driver != "" && g.Driver != val {
					return gpuSeen{}, fmt.Errorf("GPUs report different drivers: %s and %s", g.Driver, val)
				}
				g.Driver = val
			}
		}
	}
	if g.Tool == "rocm-smi" {
		names, err := rocmSMI.names()
		if err != nil {
			return gpuSeen{}, err
		}
		g.Names = names
	}
	if len(g.Names) == 0 {
		return gpuSeen{}, fmt.Errorf("%s lists no GPU", g.Tool)
	}
	for i, n := range g.Names {
		if n == "" {
			return gpuSeen{}, fmt.Errorf("amd-smi gives no MARKET_NAME for GPU %d", i)
		}
	}
	if g.CUDA == "" {
		// rocm-smi never prints the ROCm release: without the .info file
		// the order says it is unknown rather than guessing.
		g.CUDA = "ROCm (version inconnue)"
	}
	return g, nil
}

// rocmSMIOutput gathers `rocm-smi --showproductname` lines, one
// "GPU[N]\t\t: Key: \t\tvalue" line per field and GPU.
type rocmSMIOutput struct {
	series map[int]string // "Card Series" (older releases: "Card series")
	seen   map[int]bool   // every GPU index listed, named or not
}

func (o *rocmSMIOutput) productLine(line string) {
	rest, ok := strings.CutPrefix(line, "GPU[")
	if !ok {
		return
	}
	idx, rest, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(idx)
	if !ok || err != nil {
		return
	}
	if o.seen == nil {
		o.seen, o.series = map[int]bool{}, map[int]string{}
	}
	o.seen[i] = true
	// rest is "\t\t: Card Series: \t\tInstinct MI210"; error lines such as
	// ": get_name, Error when calling libdrm" have no second colon.
	key, val, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(rest), ":"), ":")
	if ok && strings.EqualFold(strings.TrimSpace(key), "Card Series") {
		o.series[i] = strings.TrimSpace(val)
	}
}

// names returns the GPUs' names in index order, in amd-smi's MARKET_NAME
// form so one smi_name_pattern serves both tools.
func (o *rocmSMIOutput) names() ([]string, error) {
	names := make([]string, len(o.seen))
	for i := range names {
		if !o.seen[i] {
			return nil, fmt.Errorf("rocm-smi skips GPU %d", i)
		}
		s := o.series[i]
		if s == "" || strings.EqualFold(s, "N/A") {
			return nil, fmt.Errorf("rocm-smi gives no Card Series for GPU %d", i)
		}
		names[i] = rocmSMIName(s)
	}
	return names, nil
}

// rocmSMIName turns rocm-smi's card series into amd-smi's market name.
// Releases differ: "Instinct MI210" (libdrm's name, no vendor), the pci.ids
// form "Aldebaran/MI200 [Instinct MI210]" or "Arcturus GL-XL [AMD Instinct
// MI100]", or already "AMD Instinct MI300X OAM".
func rocmSMIName(series string) string {
	if open := strings.LastIndexByte(series, '['); open >= 0 && strings.HasSuffix(series, "]") {
		series = strings.TrimSpace(series[open+1 : len(series)-1])
	}
	if len(series) >= len("Instinct ") && strings.EqualFold(series[:len("Instinct ")], "Instinct ") {
		series = "AMD " + series
	}
	return series
}

// notes says, in French, what was read and which compute stack the host
// runs (the FAQ: CUDA for NVIDIA, ROCm for AMD).
func (g gpuSeen) notes(host string) string {
	if strings.HasPrefix(g.CUDA, "ROCm") {
		return fmt.Sprintf("Lu par %s sur %s. Pile de calcul : %s (GPU AMD : ROCm, pas CUDA).", g.Tool, host, g.CUDA)
	}
	return fmt.Sprintf("Lu par %s sur %s (mémoire par GPU : %s). Pile de calcul : CUDA %s.", g.Tool, host, g.Memory[0], g.CUDA)
}
