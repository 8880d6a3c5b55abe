package sshtest

// The stand-in hosts' GPUs and PyTorch: what their tools print, recorded
// on real hardware where it could be (each says where it comes from).

import (
	"fmt"
	"strconv"
)

// GPU outputs of `nvidia-smi --query-gpu=name,memory.total,driver_version
// --format=csv,noheader` and of the plain `nvidia-smi` header (NVIDIA), or
// of `amd-smi static --asic --driver` and the ROCm release in
// /opt/rocm/.info/version (AMD), or, for an AMD host with rocm-smi and no
// amd-smi, of `rocm-smi --showproductname` and `rocm-smi
// --showdriverversion`.
type GPU struct {
	Query          string
	Header         string
	AMDSMI         string
	ROCm           string
	ROCmSMIProduct string
	ROCmSMIDriver  string
}

// amdMI210Block is one GPU's block of `amd-smi static --asic --driver` on an
// AMD Instinct MI210.
//
// ASIC: recorded on an MI210, https://github.com/ROCm/rocm-systems/pull/3654
// (comment of 2026-03-02, `sudo amd-smi static`; the lines from ASIC_SERIAL
// on left out).
//
// DRIVER: assembled, not recorded on an MI210. The layout (NAME: amdgpu,
// VERSION) is amd-smi's as recorded on an MI350X in
// https://github.com/ROCm/rocm-systems/pull/2987 (its OS_KERNEL_VERSION line
// left out); the version 6.16.13 is the amdgpu driver recorded on a
// four-MI210 host in https://github.com/ROCm/omnistat/pull/315 (metric
// rocm_version_info, driver_ver="6.16.13", type="AMD Instinct MI210").
func amdMI210Block(i int) string {
	return fmt.Sprintf("GPU: %d\n"+
		"    ASIC:\n"+
		"        MARKET_NAME: AMD Instinct MI210\n"+
		"        VENDOR_ID: 0x1002\n"+
		"        VENDOR_NAME: Advanced Micro Devices Inc. [AMD/ATI]\n"+
		"        SUBVENDOR_ID: 0x1002\n"+
		"        DEVICE_ID: 0x740f\n"+
		"        SUBSYSTEM_ID: 0x0c34\n"+
		"        REV_ID: 0x02\n"+
		"    DRIVER:\n"+
		"        NAME: amdgpu\n"+
		"        VERSION: 6.16.13\n\n", i)
}

// MI210x2 is a two-GPU AMD Instinct MI210 host (see amdMI210Block) with
// ROCm 6.2.0-66 in /opt/rocm/.info/version. That release string was
// recorded on an MI210 in a public Markdown page, "Instinct (CDNA) —
// contributor sweeps and studies", section "AMD Instinct MI210 64GB
// (CDNA2/gfx90a, ROCm 6.2)" by github.com/pestopoppa ("One MI210 64 GB
// HBM2e (gfx90a, CDNA2), ROCm 6.2.0-66"); the repository holding that page
// could not be found, so its address is missing. That the string sits in
// /opt/rocm/.info/version on that host is assumed, not recorded (ROCm
// installs keep the release there in that form).
var MI210x2 = GPU{AMDSMI: amdMI210Block(0) + amdMI210Block(1), ROCm: "6.2.0-66\n"}

// rocmSMIEnd closes every rocm-smi report (as in both recordings below).
const rocmSMIEnd = "==========================================================================================\n" +
	"================================== End of ROCm SMI Log ===================================\n"

// rocmSMIDriver is `rocm-smi --showdriverversion` printing version v; the
// section's layout is the one recorded in MI300Xx4ROCmSMI's `rocm-smi -a`.
func rocmSMIDriver(v string) string {
	return "\n\n============================ ROCm System Management Interface ============================\n" +
		"============================== Version of System Component ===============================\n" +
		"Driver version: " + v + "\n" + rocmSMIEnd
}

// MI210x2ROCmSMI is a two-GPU AMD Instinct MI210 host with rocm-smi only
// (no amd-smi, no /opt/rocm/.info/version).
//
// Product names: recorded verbatim, `rocm-smi --showproductname` on host
// n016 (two MI210, ROCm 6.3.3 loaded as an environment module, amdgpu
// 6.10.5) in https://github.com/ROCm/ROCm/issues/5480, comment by torehl of
// 2025-11-17 (the search index also lists it under
// ROCm/legacy-rocm-build#5480). Its "Card Series" is "Instinct MI210",
// without "AMD".
//
// Driver version: assembled, not recorded. The same comment records
// `dmesg | grep "amdgpu version:"` -> "[drm] amdgpu version: 6.10.5" on that
// host; rocm-smi's "Driver version" is that amdgpu module version
// (ROCm/rocm_smi_lib README, "Version"); the layout is rocmSMIDriver's.
//
// ROCm release: none. rocm-smi does not print it and the host loaded ROCm
// from a module, not /opt/rocm, so the order says "ROCm (version inconnue)".
var MI210x2ROCmSMI = GPU{
	ROCmSMIProduct: "\n============================ ROCm System Management Interface ============================\n" +
		"====================================== Product Info ======================================\n" +
		"GPU[0]\t\t: Card Series: \t\tInstinct MI210\n" +
		"GPU[0]\t\t: Card Model: \t\t0x740f\n" +
		"GPU[0]\t\t: Card Vendor: \t\tAdvanced Micro Devices, Inc. [AMD/ATI]\n" +
		"GPU[0]\t\t: Card SKU: \t\tD67301\n" +
		"GPU[0]\t\t: Subsystem ID: \t0x0c34\n" +
		"GPU[0]\t\t: Device Rev: \t\t0x02\n" +
		"GPU[0]\t\t: Node ID: \t\t2\n" +
		"GPU[0]\t\t: GUID: \t\t12261\n" +
		"GPU[0]\t\t: GFX Version: \t\tgfx90a\n" +
		"GPU[1]\t\t: Card Series: \t\tInstinct MI210\n" +
		"GPU[1]\t\t: Card Model: \t\t0x740f\n" +
		"GPU[1]\t\t: Card Vendor: \t\tAdvanced Micro Devices, Inc. [AMD/ATI]\n" +
		"GPU[1]\t\t: Card SKU: \t\tD67301\n" +
		"GPU[1]\t\t: Subsystem ID: \t0x0c34\n" +
		"GPU[1]\t\t: Device Rev: \t\t0x02\n" +
		"GPU[1]\t\t: Node ID: \t\t3\n" +
		"GPU[1]\t\t: GUID: \t\t36740\n" +
		"GPU[1]\t\t: GFX Version: \t\tgfx90a\n" + rocmSMIEnd,
	ROCmSMIDriver: rocmSMIDriver("6.10.5"),
}

// MI300Xx4ROCmSMI is a four-GPU AMD Instinct MI300X host with rocm-smi only:
// `rocm-smi -a` recorded on a four-MI300X cloud machine (virtual
// functions: Card SKU MI3SRIOV) in
// github.com/thamada/nvidia-smi, gls/MI300X_x4_smi.py (commit b09ef139,
// variable out_a). Adapted: its "Product Info" and "Version of System
// Component" sections are cut out of that report and each printed between
// the report's own banner and closing lines, as one-flag runs print them.
var MI300Xx4ROCmSMI = GPU{
	ROCmSMIProduct: "\n\n============================ ROCm System Management Interface ============================\n" +
		"====================================== Product Info ======================================\n" +
		mi300xProduct(0) + mi300xProduct(1) + mi300xProduct(2) + mi300xProduct(3) + rocmSMIEnd,
	ROCmSMIDriver: rocmSMIDriver("6.7.0"),
}

func mi300xProduct(i int) string {
	return fmt.Sprintf("GPU[%[1]d]\t\t: Card series: \t\tAMD Instinct MI300X OAM\n"+
		"GPU[%[1]d]\t\t: Card model: \t\t0x74a1\n"+
		"GPU[%[1]d]\t\t: Card vendor: \t\tAdvanced Micro Devices, Inc. [AMD/ATI]\n"+
		"GPU[%[1]d]\t\t: Card SKU: \t\tMI3SRIOV\n", i)
}

// RTXA5000 was recorded on an RTX A5000 node with driver 570.211.01:
// github.com/akash-network/provider-configs issue #82 (query line; that
// report also asked for pci.device_id, the fourth column is dropped here).
// The header line for the same driver ("CUDA Version: 12.8") is the one
// nvidia-smi 570.211.01 prints, as recorded in many public reports.
var RTXA5000 = GPU{
	Query: "NVIDIA RTX A5000, 24564 MiB, 570.211.01\n",
	Header: "+-----------------------------------------------------------------------------------------+\n" +
		"| NVIDIA-SMI 570.211.01             Driver Version: 570.211.01     CUDA Version: 12.8     |\n" +
		"|-----------------------------------------+------------------------+----------------------+\n",
}

// QuadroRTX4000x2 is a two-GPU Quadro RTX 4000 node with driver 535.129.03
// (CUDA 12.2): github.com/akash-network/provider-configs pull request #12,
// whose nvidia-smi table shows "Quadro RTX 4000", 8192MiB per card; the
// CSV lines are that table in the query's format.
var QuadroRTX4000x2 = GPU{
	Query: "Quadro RTX 4000, 8192 MiB, 535.129.03\nQuadro RTX 4000, 8192 MiB, 535.129.03\n",
	Header: "+---------------------------------------------------------------------------------------+\n" +
		"| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |\n" +
		"|-----------------------------------------+----------------------+----------------------+\n",
}

// Torch describes the stand-in PyTorch: its version, the backend it was
// built for (HIP set: ROCm, else CUDA), and whether it sees a GPU.
type Torch struct {
	Version   string
	CUDA      string
	HIP       string
	Available bool
	Device    string
}

func (tc Torch) module() string {
	pyStr := func(s string) string {
		if s == "" {
			return "None"
		}
		return strconv.Quote(s)
	}
	avail := "False"
	if tc.Available {
		avail = "True"
	}
	return "# Stand-in PyTorch for the preset check (package sshtest).\n" +
		"__version__ = " + pyStr(tc.Version) + "\n" +
		"class version:\n    cuda = " + pyStr(tc.CUDA) + "\n    hip = " + pyStr(tc.HIP) + "\n" +
		"class cuda:\n    @staticmethod\n    def is_available():\n        return " + avail + "\n" +
		"    @staticmethod\n    def get_device_name(i):\n        return " + pyStr(tc.Device) + "\n"
}

// standInJupyter is the stand-in `jupyter` (see Options.Jupyter); its
// process title contains "jupyter-lab", like the real one's.
const standInJupyter = `#!/bin/sh
[ "$1" = lab ] || { echo "stand-in jupyter: only 'jupyter lab'" >&2; exit 2; }
exec /usr/bin/python3 -c '
import http.server, json, os
c = json.load(open(os.path.expanduser("~/.jupyter/jupyter_server_config.json")))["ServerApp"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == "token " + c["token"]
        self.send_response(200 if ok else 403)
        self.end_headers()
        self.wfile.write(b"stand-in jupyter lab\n" if ok else b"forbidden\n")
    def log_message(self, *a):
        pass
http.server.HTTPServer((c["ip"], c["port"]), H).serve_forever()
' jupyter-lab-standin
`
