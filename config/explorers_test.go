package config

import "testing"

func TestExplorersFromEnv(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	got, err := ExplorersFromEnv(getenv)
	if err != nil || len(got) != 0 {
		t.Fatalf("default: %v %v (want none)", got, err)
	}
	env["KERNODECK_EXPLORER_URL_BITCOIN"] = "https://mempool.space/tx/{txid}"
	env["KERNODECK_EXPLORER_URL_TRON"] = "https://tronscan.org/#/transaction/{txid}"
	got, err = ExplorersFromEnv(getenv)
	if err != nil || got["bitcoin"] != "https://mempool.space/tx/{txid}" || got["tron"] != "https://tronscan.org/#/transaction/{txid}" || len(got) != 2 {
		t.Fatalf("set: %v %v", got, err)
	}
	for _, bad := range []string{"https://mempool.space/tx/", "javascript:alert({txid})", "mempool.space/tx/{txid}", "ftp://x/{txid}"} {
		env["KERNODECK_EXPLORER_URL_BITCOIN"] = bad
		if _, err := ExplorersFromEnv(getenv); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
