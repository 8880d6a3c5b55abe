package sshhost

import (
	"fmt"
	"regexp"
	"strings"
)

// gpuSeen is what nvidia-smi or amd-smi reported on a host.
type gpuSeen struct {
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
	var g gpuSeen
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
// "GPU: N" block per GPU), then the ROCm release installed.
const amdVerifyScript = `set -u
echo '--- amd-smi'
amd-smi static --asic --driver || exit 3
echo '--- rocm'
cat /opt/rocm/.info/version 2>/dev/null || true
`

// parseAMDVerify reads amdVerifyScript's output.
func parseAMDVerify(out string) (gpuSeen, error) {
	var g gpuSeen
	section, block := "", ""
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(raw)
		if name, ok := strings.CutPrefix(raw, "--- "); ok {
			section = name
			continue
		}
		switch {
		case line == "":
		case section == "rocm":
			if g.CUDA == "" {
				g.CUDA = "ROCm " + line
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
	if len(g.Names) == 0 {
		return gpuSeen{}, fmt.Errorf("amd-smi lists no GPU")
	}
	for i, n := range g.Names {
		if n == "" {
			return gpuSeen{}, fmt.Errorf("amd-smi gives no MARKET_NAME for GPU %d", i)
		}
	}
	if g.CUDA == "" {
		g.CUDA = "ROCm (version inconnue)"
	}
	return g, nil
}

// notes says, in French, what was read and which compute stack the host
// runs (the FAQ: CUDA for NVIDIA, ROCm for AMD).
func (g gpuSeen) notes(tool, host string) string {
	if strings.HasPrefix(g.CUDA, "ROCm") {
		return fmt.Sprintf("Lu par %s sur %s. Pile de calcul : %s (GPU AMD : ROCm, pas CUDA).", tool, host, g.CUDA)
	}
	return fmt.Sprintf("Lu par %s sur %s (mémoire par GPU : %s). Pile de calcul : CUDA %s.", tool, host, g.Memory[0], g.CUDA)
}
