#!/usr/bin/env bash
# The models in JS (web/lib/model/ over wasm/bindings_model.cpp and bindings_llama.cpp): GPT-2
# and the Llama family (llama, mistral, qwen2) forward against the committed PyTorch
# references, tokenizers, KV-cache generation, damaged files. The C++ side
# (tests/cpp/test_model_*.cpp) runs in stages 10/11 with the rest of the doctest suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
for f in web/models/tiny-kjv/config.json web/models/tiny-kjv/model.safetensors tests/data/model/tiny-kjv.json \
         web/models/tiny-kjv-bpe/model.safetensors web/models/tiny-kjv-bpe/vocab.json web/models/tiny-kjv-bpe/tokenizer_config.json \
         tests/data/model/tiny-kjv-bpe.json web/models/tiny-kjv-induction/model.safetensors \
         tests/data/model/random-gpt2.json tests/data/llama/llama-rope3-ref/ref.json; do
  [ -f "$f" ] || { echo "50-model: missing $f (tools/model/train_tiny.py, make_reference.py and make_llama_reference.py write it)" >&2; exit 1; }
done
bash tools/build.sh   # incremental: a no-op when an earlier stage built dist/
node --test tests/js/model*.test.js
# forward/generation once more on the threads build (results must not depend on threads)
QKV_VARIANT=simd-threads node --test tests/js/model.test.js tests/js/model-llama.test.js
