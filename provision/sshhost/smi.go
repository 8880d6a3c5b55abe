package sshhost

import (
	"fmt"
	"regexp"
	"strings"
)

// gpuSeen is what nvidia-smi reported on a host.
type gpuSeen struct {
	Names  []string // one per GPU, in index order
	Memory []string
	Driver string
	CUDA   string
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
