// Package deploy holds no code: its tests check the deployment files beside
// it (systemd units, the Temporal server's configuration template and the
// production-shaped script scripts/prodlike.sh) without running them.
package deploy
