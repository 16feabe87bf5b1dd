# bench/lib/llamacpp.sh - sourced by the benchmark scripts that run llama.cpp as the peer:
# installs the pinned llama-cpp-python when another or no version is there, or one built with
# AMX. pip compiles llama.cpp natively (-march=native less AMX), which takes a while
# (bench/README.md).
#
#   llamacpp_install
#
# AMX off: llama.cpp's AMX matmul (a -march=native build on a CPU with AMX) segfaulted on
# these VMs at the first eval (ggml-org/llama.cpp#20824); it serves only dense matrices
# (attention, lm_head), never the MoE experts (MUL_MAT_ID).

LLAMA_CPP_PYTHON_VERSION=0.3.36

llamacpp_install() {
  local no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" have
  # the installed version, read without importing it (a missing dependency must not make
  # it look absent and cost a rebuild)
  have=$(python3 -c "import importlib.metadata as m; print(m.version('llama-cpp-python'))" \
         2>/dev/null || true)
  if [ "$have" != "$LLAMA_CPP_PYTHON_VERSION" ] ||
     python3 bench/llamacpp_bench.py --system-info | grep -q "AMX_INT8 = 1"; then
    echo "installing llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION without AMX" \
      "(was: ${have:-none})" >&2
    CMAKE_ARGS="-DCMAKE_C_FLAGS='$no_amx' -DCMAKE_CXX_FLAGS='$no_amx' -DLLAVA_BUILD=OFF" \
      pip install --quiet --root-user-action=ignore --force-reinstall --no-deps --no-cache-dir \
      "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
  fi
  # its dependencies (numpy, diskcache, jinja2, ...), which --no-deps left out; nothing when
  # they are there
  pip install --quiet --root-user-action=ignore "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
}
