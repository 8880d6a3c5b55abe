package domain

import (
	"testing"
	"time"
)

func TestFrenchUSD(t *testing.T) {
	for cents, want := range map[int64]string{
		0: "0,00 USD", 5: "0,05 USD", 2357: "23,57 USD", 311800: "3\u202f118,00 USD",
		123456789: "1\u202f234\u202f567,89 USD", -311800: "-3\u202f118,00 USD", 100000: "1\u202f000,00 USD",
	} {
		if got := FrenchUSD(cents); got != want {
			t.Errorf("FrenchUSD(%d) = %q, want %q", cents, got, want)
		}
	}
}

func TestFrenchAmounts(t *testing.T) {
	for in, want := range map[string]string{
		"Commande enregistrée : 1 lot, 2 GPU, 7 jours, total 3118.00 USD. En attente du règlement.": "Commande enregistrée : 1 lot, 2 GPU, 7 jours, total 3\u202f118,00 USD. En attente du règlement.",
		"Recharge créditée : 100.00 USD ajoutés.":                                                   "Recharge créditée : 100,00 USD ajoutés.",
		"Solde insuffisant : 12.50 USD disponibles, 3118.00 USD dus.":                               "Solde insuffisant : 12,50 USD disponibles, 3\u202f118,00 USD dus.",
		"-42.10 USD":                              "-42,10 USD",
		"au cours de 64123.45 USD par BTC":        "au cours de 64\u202f123,45 USD par BTC",
		"0.00036262 BTC, pas d'USD ici":           "0.00036262 BTC, pas d'USD ici",
		"version 1.2.30 USD":                      "version 1.2.30 USD", // part of a longer number: left alone
		"déjà 3 118,00 USD":                       "déjà 3 118,00 USD",
		"12.5 USD (one decimal: not FormatUSD's)": "12.5 USD (one decimal: not FormatUSD's)",
		"total 10.00 USDT":                        "total 10.00 USDT",
		"":                                        "",
	} {
		if got := FrenchAmounts(in); got != want {
			t.Errorf("FrenchAmounts(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGPUNames(t *testing.T) {
	n := NewGPUNames([]CatalogItem{{Model: "b200", DisplayName: "NVIDIA B200"}, {Model: "rtx-a5000", DisplayName: "NVIDIA RTX A5000"},
		{Model: "l40s", DisplayName: "NVIDIA L40S"}})
	if got := n.Name("b200"); got != "NVIDIA B200" {
		t.Fatalf("Name(b200) = %q", got)
	}
	if got := n.Name("mi300x"); got != "mi300x" {
		t.Fatalf("unknown model: %q", got)
	}
	for in, want := range map[string]string{
		"Réservation de 2 GPU b200 en cours.":                  "Réservation de 2 GPU NVIDIA B200 en cours.",
		"Aucune machine rtx-a5000 ne compte 3 GPU.":            "Aucune machine NVIDIA RTX A5000 ne compte 3 GPU.",
		"b200x et xb200 et rtx-a50000 restent":                 "b200x et xb200 et rtx-a50000 restent",
		"Machine vérifiée : 2 GPU NVIDIA B200 détectés (b200)": "Machine vérifiée : 2 GPU NVIDIA B200 détectés (NVIDIA B200)",
		"l40s":     "NVIDIA L40S",
		"é b200 é": "é NVIDIA B200 é",
	} {
		if got := n.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CustomerText("total 3118.00 USD pour b200", n); got != "total 3\u202f118,00 USD pour NVIDIA B200" {
		t.Fatalf("CustomerText: %q", got)
	}
}

func TestDeviceLabel(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0":                                                                  "Firefox sur Linux",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1": "Safari sur iPhone",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0":           "Edge sur Windows",
		"Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36":                            "Chrome sur Android",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15":                      "Safari sur macOS",
		"curl/8.5.0": "curl",
		"":           "Appareil inconnu",
	} {
		if got := DeviceLabel(ua); got != want {
			t.Errorf("DeviceLabel(%q) = %q, want %q", ua, got, want)
		}
	}
	c := NewSessionClient("a\x00b\n"+string(make([]byte, 600)), "192.0.2.1")
	if len(c.UserAgent) > MaxUserAgentLen || c.UserAgent[:2] != "ab" {
		t.Fatalf("user agent kept: %q", c.UserAgent[:10])
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 minute", 1: "1 minute", 2: "2 minutes", 15: "15 minutes"} {
		if got := Plural(n, "minute", "minutes"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFrenchDatesAndNetworks(t *testing.T) {
	in := "envoyez 0.1 BTC sur le réseau bitcoin avant le 03/12/2026 à 14:05 UTC ; borne du 04/01/2027 09:30 UTC"
	want := "envoyez 0.1 BTC sur le réseau Bitcoin avant le 3 décembre 2026 à 15:05 (14:05 UTC) ; borne du 4 janvier 2027 à 10:30 (09:30 UTC)"
	if got := CustomerText(in, nil); got != want {
		t.Fatalf("CustomerText:\n got %q\nwant %q", got, want)
	}
	if got := FrenchPlurals("prolongée de 1 jour(s), puis de 3 jour(s) ; 2 lot(s)"); got != "prolongée de 1 jour, puis de 3 jours ; 2 lots" {
		t.Fatalf("FrenchPlurals: %q", got)
	}
	if got := FrenchNetworks("le réseau bitcoins, réseau x"); got != "le réseau bitcoins, réseau x" {
		t.Fatalf("FrenchNetworks: %q", got)
	}
}

// Dates read in Paris time with UTC beside it, Paris's day when they differ
// (winter UTC+1, summer UTC+2).
func TestFrenchDateInParisWithUTC(t *testing.T) {
	for at, want := range map[time.Time]string{
		time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC): "1 janvier 2027 à 00:30 (23:30 UTC)",
		time.Date(2026, 7, 14, 8, 0, 0, 0, time.UTC):    "14 juillet 2026 à 10:00 (08:00 UTC)",
	} {
		if got := FrenchDate(at); got != want {
			t.Errorf("FrenchDate(%v) = %q, want %q", at, got, want)
		}
	}
}
