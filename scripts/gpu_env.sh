# Sourced on the lent GPU machine (bare, offline) by scripts/gpu_build.sh and
# scripts/gpu_session.sh: unpacks the Debian packages of .gpu/debs into /tmp/deps (oneDNN,
# GoogleTest, nlohmann-json, CLI11) and sets CMAKE_PREFIX_PATH / LD_LIBRARY_PATH for them and for
# cuDNN and cuBLAS (the toolkit's when present, else the pip wheels beside PyTorch). Sets
# `cudnn_root` (empty when the toolkit has cuDNN) and writes the device line to $out/device.txt.
bash .gpu/unpack-debs.sh .gpu/debs /tmp/deps >/dev/null || return 1
eval "$(bash .gpu/unpack-debs.sh --env /tmp/deps)"
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
cudnn_root=""
if [ ! -f /usr/local/cuda/include/cudnn.h ] && [ -d "$site/nvidia/cudnn" ]; then
  cudnn_root="$site/nvidia/cudnn"
  [ -e "$cudnn_root/lib/libcudnn.so" ] || ln -sf libcudnn.so.9 "$cudnn_root/lib/libcudnn.so"
  export LD_LIBRARY_PATH=$cudnn_root/lib:$LD_LIBRARY_PATH
fi
for lib in cublas cuda_runtime nvjitlink; do
  [ -d "$site/nvidia/$lib/lib" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$site/nvidia/$lib/lib
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/device.txt" 2>&1 || true
return 0
