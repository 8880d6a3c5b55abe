package postgres

import "github.com/kernodeck/kernodeck/secrets"

// SecretColumn is a column holding a sealed access secret. Its value is
// sealed with the column and the order as associated data, so a ciphertext
// copied to another column or another order's row does not open.
type SecretColumn string

// The columns holding sealed access secrets.
const (
	AccessPassword          SecretColumn = "order_access.password"
	AccessPrivateKey        SecretColumn = "order_access.private_key"
	AccessJupyterToken      SecretColumn = "order_access.jupyter_token"
	ReservationPrivateKey   SecretColumn = "host_reservations.private_key"
	ReservationJupyterToken SecretColumn = "host_reservations.jupyter_token"
)

func (c SecretColumn) label(orderRef string) string { return string(c) + ":" + orderRef }

// Seal seals an order's secret for column c.
func (c SecretColumn) Seal(k *secrets.Keyring, orderRef, clear string) string {
	return k.Seal(clear, c.label(orderRef))
}

// Open opens an order's secret sealed for column c.
func (c SecretColumn) Open(k *secrets.Keyring, orderRef, sealed string) (string, error) {
	return k.Open(sealed, c.label(orderRef))
}
