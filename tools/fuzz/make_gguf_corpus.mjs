// Writes the seed corpus of the GGUF fuzz target (tests/fuzz/fuzz_gguf.cpp) into
// tests/fuzz/corpus/gguf/: small GGUF files (within the fuzz stage's 9216-byte inputs) of each
// architecture and tensor type the loaders read, by the tests' GGUF writer
// (tests/js/shared/gguf-writer.js). Run: node tools/fuzz/make_gguf_corpus.mjs
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { checkpointToGguf, f32Safetensors, quantize, writeGguf } from '../../tests/js/shared/gguf-writer.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const OUT = path.join(ROOT, 'tests', 'fuzz', 'corpus', 'gguf');
mkdirSync(OUT, { recursive: true });

// seeded values in [-0.5, 0.5)
let state = 12345;
const values = (n) => Float32Array.from({ length: n }, () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32) - 0.5);

function checkpoint(shapes) {
  return f32Safetensors(Object.entries(shapes).map(([name, shape]) => ({ name, shape, data: values(shape.reduce((a, b) => a * b, 1)) })));
}

// a tiny Llama (E = 32: whole Q8_0 / Q4_0 blocks), head_dim 8, 1 layer
const llama = { model_type: 'llama', hidden_size: 32, intermediate_size: 32, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 1, vocab_size: 8, max_position_embeddings: 16, tie_word_embeddings: true };
const llamaShapes = {
  'model.embed_tokens.weight': [8, 32], 'model.layers.0.input_layernorm.weight': [32],
  'model.layers.0.self_attn.q_proj.weight': [32, 32], 'model.layers.0.self_attn.k_proj.weight': [16, 32],
  'model.layers.0.self_attn.v_proj.weight': [16, 32], 'model.layers.0.self_attn.o_proj.weight': [32, 32],
  'model.layers.0.post_attention_layernorm.weight': [32], 'model.layers.0.mlp.gate_proj.weight': [32, 32],
  'model.layers.0.mlp.up_proj.weight': [32, 32], 'model.layers.0.mlp.down_proj.weight': [32, 32], 'model.norm.weight': [32],
};
for (const type of ['Q8_0', 'Q4_0']) {
  writeFileSync(path.join(OUT, `llama_${type}.gguf`), checkpointToGguf(llama, checkpoint(llamaShapes), type).gguf);
}
// a tiny GPT-2 (E = 8), F32 (read in place) and F16
const gpt2 = { model_type: 'gpt2', n_layer: 1, n_head: 2, n_embd: 8, n_positions: 4, vocab_size: 6 };
const gpt2Checkpoint = checkpoint({
  'wte.weight': [6, 8], 'wpe.weight': [4, 8], 'h.0.ln_1.weight': [8], 'h.0.ln_1.bias': [8],
  'h.0.attn.c_attn.weight': [8, 24], 'h.0.attn.c_attn.bias': [24], 'h.0.attn.c_proj.weight': [8, 8],
  'h.0.attn.c_proj.bias': [8], 'h.0.ln_2.weight': [8], 'h.0.ln_2.bias': [8], 'h.0.mlp.c_fc.weight': [8, 32],
  'h.0.mlp.c_fc.bias': [32], 'h.0.mlp.c_proj.weight': [32, 8], 'h.0.mlp.c_proj.bias': [8], 'ln_f.weight': [8], 'ln_f.bias': [8],
});
for (const type of ['F32', 'F16']) writeFileSync(path.join(OUT, `gpt2_${type}.gguf`), checkpointToGguf(gpt2, gpt2Checkpoint, type).gguf);
// one block of each K-quant, with metadata of every value type and an array
for (const type of ['Q4_K', 'Q5_K', 'Q6_K']) {
  writeFileSync(path.join(OUT, `blocks_${type}.gguf`), writeGguf([
    ['general.architecture', 'string', 'qwen3'], ['general.alignment', 'u32', 32], ['a.i8', 'i8', -3], ['a.u16', 'u16', 7],
    ['a.f64', 'f64', 0.25], ['a.bool', 'bool', true], ['a.list', ['array', 'i32'], [1, -2, 3]],
  ], [{ name: 'blk.0.ffn_down.weight', type, ne: [256, 1], bytes: quantize(values(256), type) }]));
}
console.log(`wrote the GGUF seed corpus to ${path.relative(ROOT, OUT)}`);
