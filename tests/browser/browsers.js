// One small driver over the two browsers the tests run in, so that a test written against it
// runs in either: Chromium through playwright-core (harness.js: SwiftShader WebGPU flags) and
// Debian's Firefox ESR through puppeteer-core over WebDriver BiDi (Playwright needs its own
// patched Firefox). Pick one with QKV_BROWSER=chromium|firefox (default chromium).
// Tests that need more than this (downloads, file inputs, init scripts) use harness.js's
// Playwright pages directly and stay Chromium-only.
import { launch as launchChromium, openPage as openChromiumPage } from './harness.js';

export const BROWSER = process.env.QKV_BROWSER ?? 'chromium';
export const BROWSERS = ['chromium', 'firefox'];

/** Console messages a test treats as problems: Playwright says 'warning', Puppeteer 'warn'. */
const PROBLEM_TYPES = new Set(['error', 'warning', 'warn', 'assert']);

/**
 * A page in either browser: problems (console errors/warnings and page errors, as harness.js
 * collects them), evaluate(fn, arg), waitFor(fn, arg, { timeout, polling }) (until fn returns
 * truthy; timeout 0 = none), waitForSelector, click, fill, screenshot(path), close; raw is the
 * underlying Playwright or Puppeteer page.
 */
class Page {
  constructor(raw, kind) { this.raw = raw; this.kind = kind; this.problems = raw.problems ?? []; }
  evaluate(fn, arg) { return arg === undefined ? this.raw.evaluate(fn) : this.raw.evaluate(fn, arg); }
  async waitFor(fn, arg, { timeout = 30_000, polling = 100 } = {}) {
    if (this.kind === 'playwright') await this.raw.waitForFunction(fn, arg, { timeout, polling });
    else await waitThroughNavigation((t) => this.raw.waitForFunction(fn, { timeout: t, polling }, arg), timeout);
  }
  async waitForSelector(selector, { timeout = 30_000 } = {}) { await this.raw.waitForSelector(selector, { timeout }); }
  click(selector) { return this.raw.click(selector); }
  fill(selector, value) { return this.kind === 'playwright' ? this.raw.fill(selector, value) : this.raw.locator(selector).fill(value); }
  /** The element's visible text (innerText), as a reader of the page sees it. */
  text(selector) { return this.raw.$eval(selector, (e) => e.innerText); }
  screenshot(path) { return this.raw.screenshot({ path, fullPage: true }); }
  close() { return this.raw.close(); }
}

/**
 * Runs a Puppeteer wait again when Firefox's BiDi fails it because the page navigated while it
 * polled (a reload in progress: "Protocol error (script.evaluate)"); any other error, and a
 * timeout, go to the caller. `timeout` 0 = none; otherwise the tries share it: `wait(ms)` gets
 * what is left.
 */
async function waitThroughNavigation(wait, timeout) {
  const deadline = timeout ? Date.now() + timeout : Infinity;
  for (;;) {
    try { return await wait(timeout ? Math.max(1, deadline - Date.now()) : 0); } catch (e) {
      const navigated = /Protocol error \(script\./.test(`${e?.cause?.message ?? ''} ${e?.message ?? ''}`);
      if (!navigated || e?.name === 'TimeoutError' || Date.now() + 100 >= deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function launchFirefox() {
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: process.env.QKV_FIREFOX ?? '/usr/bin/firefox-esr',
    headless: true,
    // no limit on one protocol call (default 180 s): waitFor is one long call in Puppeteer, and a
    // benchmark part can outlast 180 s; waitFor and waitForSelector keep their own timeouts
    protocolTimeout: 0,
  });
  return {
    name: 'firefox',
    version: `Firefox ${(await browser.version()).replace(/^firefox\//i, '')}`,
    async open(url, { viewport } = {}) {
      const raw = await browser.newPage();
      raw.problems = [];
      raw.on('console', (m) => { if (PROBLEM_TYPES.has(m.type())) raw.problems.push(`${m.type()}: ${m.text()}`); });
      raw.on('pageerror', (e) => raw.problems.push(`pageerror: ${e.message}`));
      if (viewport) await raw.setViewport(viewport);
      await raw.goto(url);
      return new Page(raw, 'puppeteer');
    },
    close: () => browser.close(),
  };
}

async function launchChromiumDriver() {
  const browser = await launchChromium();
  return {
    name: 'chromium',
    version: `Chromium ${browser.version()}`,
    async open(url, { viewport } = {}) { return new Page(await openChromiumPage(browser, url, { viewport }), 'playwright'); },
    close: () => browser.close(),
  };
}

/** Launches headless `name` ('chromium' | 'firefox'): { name, version, open(url, { viewport }) -> Page, close() }. */
export async function launchBrowser(name = BROWSER) {
  if (name === 'chromium') return launchChromiumDriver();
  if (name === 'firefox') return launchFirefox();
  throw new Error(`launchBrowser: unknown browser '${name}' (expected one of ${BROWSERS.join(', ')})`);
}
