#!/bin/bash
# Builds the stand-in images the local cluster runs (tests/images/README.md) on the dockerd
# that DOCKER_HOST names: node:22-bookworm-slim, uplink-test/mitmproxy:8 and registry:2, all
# from one debootstrap rootfs. Idempotent: an image whose recipe is unchanged (its label
# holds a hash of the recipe) is kept, and the rootfs is cached in UPLINK_IMAGES_CACHE
# (default /var/tmp/uplink-test-images), so a second run costs seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${UPLINK_IMAGES_CACHE:-/var/tmp/uplink-test-images}
base=uplink-test/bookworm:minbase
export DOCKER_BUILDKIT=0

die() { echo "build.sh: $*" >&2; exit 1; }

[ -n "${DOCKER_HOST:-}" ] || die "DOCKER_HOST is not set; point it at the test dockerd"
docker version >/dev/null 2>&1 || die "docker at $DOCKER_HOST does not answer; start dockerd first"

# The Debian mirror apt already uses, read at run time (never written into the repository).
mirror() {
	local m
	m=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	[ -n "$m" ] || m=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
	[ -n "$m" ] || die "no Debian mirror found in /etc/apt/sources.list.d/; debootstrap needs one"
	echo "$m"
}

label() { docker image inspect -f '{{index .Config.Labels "uplink-test.recipe"}}' "$1" 2>/dev/null || true; }

build_base() {
	local tar="$cache/bookworm-minbase.tar" sum
	if [ ! -s "$tar" ]; then
		command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
		mkdir -p "$cache"
		rm -rf "$cache/rootfs"
		echo "build.sh: debootstrap --variant=minbase bookworm (about a minute)"
		debootstrap --variant=minbase bookworm "$cache/rootfs" "$(mirror)" >"$cache/debootstrap.log" 2>&1 \
			|| die "debootstrap failed; see $cache/debootstrap.log"
		tar -C "$cache/rootfs" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
		rm -rf "$cache/rootfs"
	fi
	sum=$(stat -c '%s-%Y' "$tar")
	[ "$(label "$base")" = "$sum" ] && return 0
	echo "build.sh: importing $base"
	docker import -c "LABEL uplink-test.recipe=$sum" -c 'CMD ["bash"]' "$tar" "$base" >/dev/null
}

# build TAG DIR [extra file to copy into the context]
build() {
	local tag=$1 dir=$here/$2 extra=${3:-} ctx sum
	sum=$( (cat "$dir"/*; [ -z "$extra" ] || cat "$extra"; label "$base") | sha256sum | cut -c1-16)
	[ "$(label "$tag")" = "$sum" ] && return 0
	echo "build.sh: building $tag"
	ctx=$(mktemp -d)
	cp "$dir"/* "$ctx"/
	[ -z "$extra" ] || cp "$extra" "$ctx/host-ca.crt"
	if ! docker build --network host --label "uplink-test.recipe=$sum" -t "$tag" "$ctx" >"$cache/build-$2.log" 2>&1; then
		rm -rf "$ctx"
		die "building $tag failed; see $cache/build-$2.log"
	fi
	rm -rf "$ctx"
}

mkdir -p "$cache"
build_base
build node:22-bookworm-slim node /etc/ssl/certs/ca-certificates.crt
build uplink-test/mitmproxy:8 mitm
build registry:2 registry
echo "build.sh: images ready"
