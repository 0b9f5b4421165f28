# Sourced by the install scripts: sets $sudo to "" when running as root, "sudo" when sudo exists,
# or exits 1 with one line naming what needs installing. $1: the script's name; $2: what it would install.
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$1: need root or sudo to install: $2" >&2; exit 1; }
  sudo="sudo"
fi
