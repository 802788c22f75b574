#!/bin/sh
# Installs what zplan needs to build and test on Debian 12, from Debian's packages only.
# The CUDA toolkit (with NCCL) is optional and not installed here: configure finds it when present.
set -eu
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  g++ cmake ninja-build \
  libboost-graph-dev nlohmann-json3-dev libcli11-dev catch2 \
  libopenmpi-dev openmpi-bin libopenblas-dev liburing-dev
