// Shared setup of the WebGPU browser tests: a static server over the repository, headless
// Chromium with SwiftShader WebGPU, and a blank page (tests/browser/pages/webgpu.html) in
// which the tests import dist/ (the built package) and the helpers in tests/browser/webgpu/.
import { serve, launch, openPage } from '../harness.js';

/** URL path of the package the tests import: /dist, or $QKV_DIST (a path under the repository). */
export const DIST = process.env.QKV_DIST ?? '/dist';

/** Opens the test page. initScript runs before any page script (e.g. to remove WebGPU). */
export async function openSession({ isolated = true, initScript } = {}) {
  const server = await serve({ isolated });
  const browser = await launch();
  const context = await browser.newContext();
  await context.addInitScript((dist) => { globalThis.QKV_DIST = dist; }, DIST);
  if (initScript) await context.addInitScript(initScript);
  const page = await context.newPage();
  page.problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') page.problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  await page.goto(`${server.url}/tests/browser/pages/webgpu.html`);
  return {
    page,
    browser,
    async close() {
      await browser.close();
      await server.close();
    },
  };
}

export { openPage };

/**
 * The page's console errors/warnings and page errors, less Emscripten's notice that the
 * threads build blocks on the main thread (the wasm module's own business, not WebGPU's).
 */
export function pageProblems(page) {
  return page.problems.filter((p) => !p.includes('Blocking on the main thread is very dangerous'));
}
