#!/usr/bin/env bash
# Download the wheels run.sh installs on a GPU machine without network (Python 3.12,
# x86-64): alf's dependencies beyond what such a machine has (torch with CUDA, numpy,
# absl-py, tensorboard, opencv) and Sample Factory 2.1.1 with the versions it needs, each
# set in its own folder. Run on a machine with pip access, from the repository root:
#
#     bash bench/gpu_side_by_side/fetch_wheels.sh      # -> bench/gpu_side_by_side/wheels/
#
# Why these versions (docs/benchmarks.md): SF 2.1.1 uses wrappers renamed in gymnasium 1.0
# (so gymnasium 0.29.1), its rollout workers crash at their first step with numpy 2.x
# (so numpy 1.26.4), and ale-py 0.9.1 is the first with cp312 wheels and bundled ROMs that
# still works with gymnasium 0.29. alf runs with its own current versions beside it.
set -eu
DEST=${DEST:-bench/gpu_side_by_side/wheels}
PY=${PY:-python3}
dl() {  # FOLDER PACKAGE==VERSION ...
  local dir=$1; shift
  mkdir -p "$dir"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir" "$@"
}
dl "$DEST/whl_alf" gin-config==0.5.0 gymnasium==1.4.0 farama-notifications==0.0.6 \
  ale-py==0.12.1 optree==0.20.0 typing-extensions==4.16.0
dl "$DEST/whl_sf" sample-factory==2.1.1 gymnasium==0.29.1 ale-py==0.9.1 numpy==1.26.4 \
  faster-fifo==1.5.2 signal-slot-mp==1.0.5 colorlog==6.12.0 tensorboardx==2.6.5 \
  farama-notifications==0.0.6
du -sh "$DEST"/*
