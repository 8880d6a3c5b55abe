package payout

import "github.com/btcsuite/btcd/wire"

// Transaction sizes, in weight units (BIP141: a byte outside the witness
// weighs 4, a witness byte 1; vsize is weight / 4 rounded up).
const (
	// txOverheadWeight: version (4) and locktime (4) outside the witness,
	// and the segwit marker and flag (2) inside. The input and output
	// counts' varints are added by estimateVSize.
	txOverheadWeight = 4*(4+4) + 2
	// p2wpkhInputWeight: outpoint (36), empty scriptSig length (1) and
	// sequence (4) outside the witness; inside, the item count (1), a
	// signature of at most 72 bytes with its sighash byte and its length
	// (73), the compressed key and its length (34). Signers make 71 or 72
	// byte signatures, so the estimate is the largest.
	p2wpkhInputWeight = 4*(36+1+4) + 1 + 73 + 34
)

// outputSize is an output's serialized size: value, script length, script.
func outputSize(script []byte) int64 {
	return 8 + int64(wire.VarIntSerializeSize(uint64(len(script)))) + int64(len(script))
}

// estimateVSize is the virtual size of a transaction spending inputs
// P2WPKH outputs to outputs of the given scripts, once signed.
func estimateVSize(inputs int, outputs [][]byte) int64 {
	weight := int64(txOverheadWeight)
	weight += 4 * int64(wire.VarIntSerializeSize(uint64(inputs))+wire.VarIntSerializeSize(uint64(len(outputs))))
	weight += int64(inputs) * p2wpkhInputWeight
	for _, s := range outputs {
		weight += 4 * outputSize(s)
	}
	return (weight + 3) / 4
}

// DustLimit is the smallest amount an output to script may carry under a
// node's dust relay fee rate (base units per 1000 vbytes), computed as
// Bitcoin Core's and Litecoin Core's GetDustThreshold: the cost of the
// output plus the input that would spend it, at that rate. Below it a node
// refuses to relay the transaction ("dust").
func DustLimit(script []byte, dustRelayFeePerKvB int64) int64 {
	size := outputSize(script)
	if isWitnessProgram(script) {
		size += 32 + 4 + 1 + 107/4 + 4 // outpoint, scriptSig, witness discounted, sequence
	} else {
		size += 32 + 4 + 1 + 107 + 4
	}
	return size * dustRelayFeePerKvB / 1000
}

// isWitnessProgram: OP_0..OP_16 then one push of 2 to 40 bytes (BIP141).
func isWitnessProgram(script []byte) bool {
	if len(script) < 4 || len(script) > 42 {
		return false
	}
	if script[0] != 0x00 && (script[0] < 0x51 || script[0] > 0x60) {
		return false
	}
	return int(script[1])+2 == len(script)
}
