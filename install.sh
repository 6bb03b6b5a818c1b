#!/usr/bin/env bash
# Sets uplink up for the current user on Debian 12 or Ubuntu 24.04: installs the build
# dependencies (apt), builds, installs uplink and uplinkd under ~/.local, installs the
# user units, and starts uplinkd.socket. Safe to run again: every step is idempotent.
#
#   ./install.sh [--prefix DIR]
set -euo pipefail

prefix="$HOME/.local"
while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix="$2"; shift 2 ;;
	--prefix=*) prefix="${1#--prefix=}"; shift ;;
	-h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "install.sh: unknown argument '$1' (see ./install.sh --help)" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
build="$here/build-install"
say() { printf '==> %s\n' "$*"; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install.sh: apt-get needs root; install sudo or run as root" >&2; exit 1; }
	sudo=sudo
fi

packages=(gcc pkg-config meson ninja-build libuv1-dev libcurl4-openssl-dev libssl-dev
	libyaml-dev libjansson-dev libsecret-1-dev libsystemd-dev libpcre2-dev systemd)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "Installing build dependencies: ${missing[*]}"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
else
	say "Build dependencies are installed"
fi

say "Building into $build"
if [ -f "$build/build.ninja" ]; then
	meson setup --reconfigure "$build" "$here" --prefix="$prefix" --buildtype=release -Dtests=false >/dev/null
else
	meson setup "$build" "$here" --prefix="$prefix" --buildtype=release -Dtests=false >/dev/null
fi
meson compile -C "$build" >/dev/null

say "Installing under $prefix"
meson install -C "$build" --quiet >/dev/null

# Shell completion, where each shell looks for it: bash-completion's per-user folder, zsh's
# site-functions under the prefix (in $fpath when the prefix is /usr or /usr/local; else the
# line to add is printed), fish's per-user folder.
say "Installing shell completion (bash, zsh, fish)"
bash_dir="${XDG_DATA_HOME:-$HOME/.local/share}/bash-completion/completions"
zsh_dir="$prefix/share/zsh/site-functions"
fish_dir="${XDG_CONFIG_HOME:-$HOME/.config}/fish/completions"
mkdir -p "$bash_dir" "$zsh_dir" "$fish_dir"
"$prefix/bin/uplink" completion bash >"$bash_dir/uplink"
"$prefix/bin/uplink" completion zsh >"$zsh_dir/_uplink"
"$prefix/bin/uplink" completion fish >"$fish_dir/uplink.fish"
case "$prefix" in
/usr | /usr/local) ;;
*) say "For zsh, add before compinit in ~/.zshrc:  fpath=($zsh_dir \$fpath)" ;;
esac

if systemctl --user show-environment >/dev/null 2>&1; then
	say "Starting uplinkd.socket (systemd user manager)"
	systemctl --user daemon-reload
	systemctl --user enable --now uplinkd.socket
	systemctl --user try-restart uplinkd.service
else
	say "No systemd user manager here; the units are installed but not started."
	say "Run the daemon by hand instead:  $prefix/bin/uplinkd &"
fi

case ":$PATH:" in
*":$prefix/bin:"*) ;;
*) say "Add $prefix/bin to your PATH, e.g.: echo 'export PATH=\"$prefix/bin:\$PATH\"' >> ~/.profile" ;;
esac

if "$prefix/bin/uplink" status >/dev/null 2>&1; then
	"$prefix/bin/uplink" status
	say "What a session still needs (uplink doctor):"
	"$prefix/bin/uplink" doctor || say "Fix what doctor marks FAIL above, then run: uplink doctor"
else
	say "uplinkd is not running, so uplink doctor cannot check the rest yet."
fi
say "Done: $("$prefix/bin/uplink" --version)"
