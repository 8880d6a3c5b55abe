# setkey.sh: make KD_PUBKEY the only key of a running rental's account
# (the customer replaced their key, or a generated key was reissued): the
# old key stops working at once for new logins. Run as root by the SSH
# driver, after common.sh; the key file is written by the customer's uid.
# Inputs: KD_USER KD_PUBKEY
set -eu
kd_lock
kd_account
[ -n "$uid" ] || fail "no account $KD_USER on this host"
kd_install_key
echo "KD_SETKEY_OK $KD_TAG"
