#!/bin/sh
# What every agent image holds besides its agent, run as root by each agent's Dockerfile
# before its own npm install: the tools the agent's shell offers (git, tmux for the
# session, docker.io and iptables for the agent's own containers, ripgrep, jq, ...), a
# Python venv at /opt/venv for pip installs, and no sudo (root in the pod is the
# entrypoint's alone). The layers it makes are the same for every agent, so docker builds
# them once for all.
set -eu
apt-get update
apt-get install -y --no-install-recommends \
	ca-certificates tmux git openssh-client socat docker.io iptables passwd util-linux procps \
	less vim-tiny jq ripgrep curl unzip file python3 python3-venv
rm -rf /var/lib/apt/lists/*
if command -v sudo >/dev/null; then
	echo "base.sh: sudo came in with the packages; an agent image must not have it" >&2
	exit 1
fi
python3 -m venv /opt/venv
