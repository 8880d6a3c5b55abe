package sshhost

import "testing"

// rocm-smi's card series takes the form of amd-smi's market name whatever
// the release printed: libdrm's name without vendor (ROCm/ROCm#5480, MI210),
// the pci.ids form (easybuild-framework#3978, MI100; pci.ids 1002:740f for
// the MI210) or the market name itself (thamada/nvidia-smi, MI300X).
func TestROCmSMINameAsMarketName(t *testing.T) {
	for series, want := range map[string]string{
		"Instinct MI210":                      "AMD Instinct MI210",
		"Aldebaran/MI200 [Instinct MI210]":    "AMD Instinct MI210",
		"Arcturus GL-XL [AMD Instinct MI100]": "AMD Instinct MI100",
		"AMD Instinct MI300X OAM":             "AMD Instinct MI300X OAM",
	} {
		if got := rocmSMIName(series); got != want {
			t.Errorf("rocmSMIName(%q) = %q, want %q", series, got, want)
		}
	}
}
