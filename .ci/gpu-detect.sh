#!/bin/sh
# Which CuPy wheel this machine's NVIDIA driver can run, for the Makefile (POSIX sh, no bash needed).
#   stdout: the pip requirement (cupy-cuda13x or cupy-cuda12x), or nothing
#   stderr: one line saying what was chosen and why
# GPU=0 opts out. NVIDIA_SMI names the tool (default: nvidia-smi on PATH).
# The CUDA major version comes from nvidia-smi's banner ("CUDA Version: 13.0"); a banner without it
# falls back to the driver version and NVIDIA's minimum-driver table (R580 -> CUDA 13, R525 -> CUDA 12).
smi=${NVIDIA_SMI:-nvidia-smi}
say() { echo "GPU: $*" >&2; }
if [ "${GPU:-1}" = "0" ]; then say "disabled (GPU=0)"; exit 0; fi
if ! command -v "$smi" >/dev/null 2>&1; then say "none (nvidia-smi not found)"; exit 0; fi
banner=$("$smi" 2>/dev/null) || { say "none (nvidia-smi failed; make GPU=0 to silence, or fix the driver)"; exit 0; }
driver=$(printf '%s\n' "$banner" | sed -n 's/.*Driver Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
if [ -z "$driver" ]; then
  driver=$("$smi" --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
fi
cuda=$(printf '%s\n' "$banner" | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1)
if [ -z "$cuda" ] && [ -n "$driver" ]; then
  major=${driver%%.*}
  if [ "$major" -ge 580 ] 2>/dev/null; then cuda=13
  elif [ "$major" -ge 525 ] 2>/dev/null; then cuda=12
  fi
fi
case "$cuda" in
  13|12) say "NVIDIA driver ${driver:-?}, CUDA $cuda -> cupy-cuda${cuda}x"; echo "cupy-cuda${cuda}x" ;;
  "") say "none (nvidia-smi gave no CUDA version, driver ${driver:-?})" ;;
  *) say "none (NVIDIA driver ${driver:-?}, CUDA $cuda: no CuPy wheel pinned for it; CUDA 12 or 13 needed)" ;;
esac
exit 0
