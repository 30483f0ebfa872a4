#!/usr/bin/env bash
# Extra Debian packages for `make bench` only: the PyTorch peer baselines (../shared/peers) that
# bench/collectives_bench runs side by side with meshrt. Idempotent, like setup.sh.
set -euo pipefail
PACKAGES=(python3 python3-torch)
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0
echo "setup_bench: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
