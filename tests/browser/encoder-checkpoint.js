// A sentence-transformers encoder folder for the demo's browser tests (no weights can be
// downloaded here): a BertModel in Hugging Face's names and layout (embeddings.*, encoder.layer.N.*,
// pooler.*), seeded std-0.2 random weights (tests/js/random-weights.js), a small WordPiece
// vocab.txt that spells the test's sentences, and modules.json (Transformer, Pooling, Normalize)
// with 1_Pooling/config.json asking for `pooling`.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomSafetensors } from '../js/random-weights.js';

const SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
const LETTERS = 'abcdefghijklmnopqrstuvwxyz'.split('');

/** BertModel's tensors { name: shape } for config c (as tools/model/make_embed_reference.py's bert_model_shapes). */
export function bertModelShapes(c) {
  const E = c.hidden_size, I = c.intermediate_size;
  const s = {
    'embeddings.word_embeddings.weight': [c.vocab_size, E], 'embeddings.position_embeddings.weight': [c.max_position_embeddings, E],
    'embeddings.token_type_embeddings.weight': [c.type_vocab_size, E], 'embeddings.LayerNorm.weight': [E], 'embeddings.LayerNorm.bias': [E],
  };
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `encoder.layer.${i}.`;
    for (const n of ['query', 'key', 'value']) Object.assign(s, { [`${p}attention.self.${n}.weight`]: [E, E], [`${p}attention.self.${n}.bias`]: [E] });
    Object.assign(s, {
      [`${p}attention.output.dense.weight`]: [E, E], [`${p}attention.output.dense.bias`]: [E],
      [`${p}attention.output.LayerNorm.weight`]: [E], [`${p}attention.output.LayerNorm.bias`]: [E],
      [`${p}intermediate.dense.weight`]: [I, E], [`${p}intermediate.dense.bias`]: [I],
      [`${p}output.dense.weight`]: [E, I], [`${p}output.dense.bias`]: [E],
      [`${p}output.LayerNorm.weight`]: [E], [`${p}output.LayerNorm.bias`]: [E],
    });
  }
  return Object.assign(s, { 'pooler.dense.weight': [E, E], 'pooler.dense.bias': [E] });
}

/**
 * Writes the folder to dir: shape { layers, hidden, heads, intermediate }, words (lowercase) the
 * vocabulary holds whole, pooling 'mean' | 'cls' | 'max'. Returns its files { relative path: bytes }.
 */
export async function writeEncoderCheckpoint(dir, { layers, hidden, heads, intermediate }, words, pooling, seed) {
  const vocab = [...SPECIAL, ...LETTERS, ...LETTERS.map((c) => `##${c}`), ...'.,;:!?\''.split(''), ...new Set(words)];
  const config = {
    architectures: ['BertModel'], model_type: 'bert', vocab_size: vocab.length, hidden_size: hidden, num_hidden_layers: layers,
    num_attention_heads: heads, intermediate_size: intermediate, max_position_embeddings: 128, type_vocab_size: 2,
    hidden_act: 'gelu', layer_norm_eps: 1e-12, pad_token_id: 0, position_embedding_type: 'absolute',
  };
  const modules = [
    { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
    { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
    { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
  ];
  const poolingConfig = {
    word_embedding_dimension: hidden, pooling_mode_cls_token: pooling === 'cls', pooling_mode_mean_tokens: pooling === 'mean',
    pooling_mode_max_tokens: pooling === 'max', pooling_mode_mean_sqrt_len_tokens: false,
  };
  const files = {
    'config.json': JSON.stringify(config, null, 1),
    'vocab.txt': vocab.join('\n') + '\n',
    'tokenizer_config.json': JSON.stringify({ do_lower_case: true, model_max_length: 128 }),
    'modules.json': JSON.stringify(modules),
    '1_Pooling/config.json': JSON.stringify(poolingConfig),
    'model.safetensors': randomSafetensors(seed, bertModelShapes(config), 0.2),
  };
  await mkdir(join(dir, '1_Pooling'), { recursive: true });
  const bytes = {};
  for (const [name, body] of Object.entries(files)) {
    bytes[name] = typeof body === 'string' ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    await writeFile(join(dir, name), bytes[name]);
  }
  return bytes;
}
