package config

import (
	"strings"
	"testing"
	"time"
)

// The value tolerance defaults to 2 % and reads a percentage or a fraction;
// the rate sample interval defaults to 5 minutes and stays within the
// hour around a payment that bounds its value. Anything else fails at
// startup, naming the variable.
func TestValueToleranceAndRateSampleInterval(t *testing.T) {
	c, err := PaymentsFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.ValueTolerance.String() != "0.02" || c.RateSampleInterval != 5*time.Minute {
		t.Fatalf("defaults: tolerance %s, sample every %s", c.ValueTolerance, c.RateSampleInterval)
	}
	for in, want := range map[string]string{"5%": "0.05", "0.5 %": "0.005", "0.01": "0.01"} {
		c, err := PaymentsFromEnv(env(map[string]string{"KERNODECK_VALUE_TOLERANCE": in}))
		if err != nil || c.ValueTolerance.String() != want {
			t.Errorf("KERNODECK_VALUE_TOLERANCE=%q: %s %v, want %s", in, c.ValueTolerance, err, want)
		}
	}
	if c, err := PaymentsFromEnv(env(map[string]string{"KERNODECK_RATE_SAMPLE_INTERVAL": "1m"})); err != nil || c.RateSampleInterval != time.Minute {
		t.Errorf("KERNODECK_RATE_SAMPLE_INTERVAL=1m: %s %v", c.RateSampleInterval, err)
	}
	for k, bad := range map[string][]string{
		"KERNODECK_VALUE_TOLERANCE":      {"2", "0", "-2%", "60%", "deux"},
		"KERNODECK_RATE_SAMPLE_INTERVAL": {"0s", "-1m", "61m", "5"},
	} {
		for _, v := range bad {
			if _, err := PaymentsFromEnv(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%q: %v, want refused", k, v, err)
			}
		}
	}
}

// A key origin is read for Bitcoin and Litecoin, refused when malformed
// or when it cannot be the origin of the network's account key (another
// account number), naming the variable.
func TestKeyOrigins(t *testing.T) {
	// m/84'/1'/0' of BIP39's "abandon ... about" (devnodes' regtest key).
	const tpub = "tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M"
	c, err := PaymentsFromEnv(env(map[string]string{
		"KERNODECK_XPUB_LITECOIN":        tpub,
		"KERNODECK_LITECOIN_KEY_NETWORK": "litecoin-regtest",
		"KERNODECK_LITECOIN_KEY_ORIGIN":  "[73c5da0a/84h/1h/0h]",
		"KERNODECK_BITCOIN_KEY_ORIGIN":   "[d34db33f/84'/0'/0']",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.KeyOrigins["litecoin"].String() != "[73c5da0a/84'/1'/0']" || c.KeyOrigins["bitcoin"].String() != "[d34db33f/84'/0'/0']" {
		t.Fatalf("KeyOrigins = %v", c.KeyOrigins)
	}
	if c, _ := PaymentsFromEnv(env(nil)); len(c.KeyOrigins) != 0 {
		t.Errorf("default KeyOrigins = %v, want none", c.KeyOrigins)
	}
	for _, bad := range []map[string]string{
		{"KERNODECK_LITECOIN_KEY_ORIGIN": "73c5da0a"},
		{"KERNODECK_LITECOIN_KEY_ORIGIN": "[73c5da0a/84'/1'/0]"},
		{"KERNODECK_LITECOIN_KEY_ORIGIN": "[73c5da0a/84'/1'/1']", "KERNODECK_XPUB_LITECOIN": tpub, "KERNODECK_LITECOIN_KEY_NETWORK": "litecoin-regtest"},
	} {
		if _, err := PaymentsFromEnv(env(bad)); err == nil || !strings.Contains(err.Error(), "KERNODECK_LITECOIN_KEY_ORIGIN") {
			t.Errorf("%v: err = %v, want refused naming the variable", bad, err)
		}
	}
}
