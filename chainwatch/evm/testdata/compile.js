// Compiles TestToken.sol with solc-js into TestToken.abi and TestToken.bin
// (committed, so the Go tests need no npm). See README.md.
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const src = fs.readFileSync(path.join(__dirname, 'TestToken.sol'), 'utf8');
const input = {
  language: 'Solidity',
  sources: { 'TestToken.sol': { content: src } },
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: 'cancun',
    outputSelection: { '*': { TestToken: ['abi', 'evm.bytecode.object'] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors || []).filter((e) => e.severity === 'error');
if (errors.length) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const c = out.contracts['TestToken.sol'].TestToken;
fs.writeFileSync(path.join(__dirname, 'TestToken.abi'), JSON.stringify(c.abi, null, 1) + '\n');
fs.writeFileSync(path.join(__dirname, 'TestToken.bin'), c.evm.bytecode.object + '\n');
console.log('solc', solc.version(), '->', 'TestToken.abi, TestToken.bin');
