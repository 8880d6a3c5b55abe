package sshhost

// CommonScript is common.sh, for tests that run its helpers alone.
var CommonScript = commonScript
