package tron

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/kernodeck/kernodeck/chainwatch/evm"
)

// testToken reads the Ethereum watcher's minimal ERC-20 (chainwatch/evm/
// testdata, compiled with solc-js 0.8.37): TRC-20 tokens are EVM contracts,
// and USDT on Tron emits the same Transfer event.
func testToken(t *testing.T) (abi.ABI, []byte) {
	t.Helper()
	abiJSON, err := os.ReadFile("../evm/testdata/TestToken.abi")
	require.NoError(t, err)
	bin, err := os.ReadFile("../evm/testdata/TestToken.bin")
	require.NoError(t, err)
	a, err := abi.JSON(strings.NewReader(string(abiJSON)))
	require.NoError(t, err)
	return a, common.FromHex(strings.TrimSpace(string(bin)))
}

// The TRC-20 Transfer log recorded from Tron mainnet and the same transfer
// made by a real EVM (go-ethereum's simulated chain) carry the same bytes,
// and the Tron and Ethereum decoders read both the same way.
func TestTRC20LogMatchesERC20OnARealEVM(t *testing.T) {
	var infos []apiTxInfo
	require.NoError(t, json.Unmarshal([]byte(recordedInfos), &infos))
	recorded := infos[1].Log[0]
	require.Equal(t, "a614f803b6fd780986a42c78ec9c7f77e6ded13c", recorded.Address, "Tron logs omit the 41 prefix")

	// Replay the recorded transfer on the simulated chain: same recipient,
	// same amount.
	recipient := common.BytesToAddress(mustHex(t, recorded.Topics[2])[12:])
	amount := new(big.Int).SetBytes(mustHex(t, recorded.Data))
	evmLog := transferOnSimulatedChain(t, recipient, amount)

	// Byte for byte: the event's topic, the indexed recipient, the amount.
	require.Equal(t, recorded.Topics[0], hex.EncodeToString(evmLog.Topics[0][:]))
	require.Equal(t, recorded.Topics[2], hex.EncodeToString(evmLog.Topics[2][:]))
	require.Equal(t, recorded.Data, hex.EncodeToString(evmLog.Data))

	// Both decoders on the EVM's log.
	_, evmTo, evmAmount, ok := evm.DecodeTransfer(*evmLog)
	require.True(t, ok)
	contract, tronTo, tronAmount, ok := decodeTransferLog(asTronLog(evmLog))
	require.True(t, ok)
	require.Equal(t, evmLog.Address.Bytes(), contract[:])
	require.Equal(t, evmTo.Bytes(), tronTo[:])
	require.Equal(t, evmAmount, tronAmount)

	// Both decoders on the recorded Tron log.
	contract, tronTo, tronAmount, ok = decodeTransferLog(recorded)
	require.True(t, ok)
	_, evmTo, evmAmount, ok = evm.DecodeTransfer(asEVMLog(t, recorded))
	require.True(t, ok)
	require.Equal(t, evmTo.Bytes(), tronTo[:])
	require.Equal(t, evmAmount, tronAmount)
	require.Equal(t, big.NewInt(532_079_999), tronAmount) // 532.079999 USDT
	require.Equal(t, usdtMainnet, Address(contract))
	require.Equal(t, recipient.Bytes(), tronTo[:])

	// An ERC-721 Transfer (token id indexed as a third topic, no data) is
	// refused by both.
	nft := asTronLog(evmLog)
	nft.Topics = append(nft.Topics, recorded.Data)
	nft.Data = ""
	_, _, _, ok = decodeTransferLog(nft)
	require.False(t, ok)
	_, _, _, ok = evm.DecodeTransfer(asEVMLog(t, nft))
	require.False(t, ok)
}

// transferOnSimulatedChain deploys the test ERC-20 and transfers amount to
// recipient; it returns the transfer's log.
func transferOnSimulatedChain(t *testing.T, recipient common.Address, amount *big.Int) *types.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	sim := simulated.NewBackend(types.GenesisAlloc{from: {Balance: new(big.Int).Mul(big.NewInt(1000), big.NewInt(params.Ether))}})
	t.Cleanup(func() { _ = sim.Close() })
	client := sim.Client()
	chainID, err := client.ChainID(ctx)
	require.NoError(t, err)
	signer := types.LatestSignerForChainID(chainID)
	tokenABI, tokenBin := testToken(t)

	send := func(to *common.Address, data []byte) *types.Receipt {
		nonce, err := client.PendingNonceAt(ctx, from)
		require.NoError(t, err)
		head, err := client.HeaderByNumber(ctx, nil)
		require.NoError(t, err)
		gas, err := client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: to, Data: data})
		require.NoError(t, err)
		tip := big.NewInt(params.GWei)
		tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: tip,
			GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip), Gas: gas, To: to, Data: data}), signer, key)
		require.NoError(t, err)
		require.NoError(t, client.SendTransaction(ctx, tx))
		sim.Commit()
		r, err := client.TransactionReceipt(ctx, tx.Hash())
		require.NoError(t, err)
		require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
		return r
	}
	args, err := tokenABI.Pack("", "Tether USD", "USDT", uint8(6), new(big.Int).Mul(big.NewInt(1_000_000_000), big.NewInt(1_000_000)))
	require.NoError(t, err)
	deployed := send(nil, append(tokenBin, args...))
	call, err := tokenABI.Pack("transfer", recipient, amount)
	require.NoError(t, err)
	r := send(&deployed.ContractAddress, call)
	require.Len(t, r.Logs, 1)
	return r.Logs[0]
}

// asTronLog prints an EVM log as java-tron does: bare hex, 20-byte address.
func asTronLog(l *types.Log) apiLog {
	out := apiLog{Address: hex.EncodeToString(l.Address[:]), Data: hex.EncodeToString(l.Data)}
	for _, topic := range l.Topics {
		out.Topics = append(out.Topics, hex.EncodeToString(topic[:]))
	}
	return out
}

// asEVMLog reads a java-tron log into go-ethereum's type.
func asEVMLog(t *testing.T, l apiLog) types.Log {
	t.Helper()
	out := types.Log{Address: common.BytesToAddress(mustHex(t, l.Address))}
	if l.Data != "" {
		out.Data = mustHex(t, l.Data)
	}
	for _, topic := range l.Topics {
		out.Topics = append(out.Topics, common.BytesToHash(mustHex(t, topic)))
	}
	return out
}
