// Cross-origin isolation for every page: whether the page is isolated, and by what. A server
// that sends COOP/COEP isolates it by itself (npm start does). Elsewhere (a static host that
// sends no headers) this module registers the service worker coi-sw.js (web/demo/public/,
// copied next to the pages), which adds them, and reloads the page once so that the reloaded
// page is served through it. One reload at most: a page that is still not isolated after it, or
// whose service worker cannot install, runs single-threaded and says why. Registration starts
// when this module is first imported.

/** How the page is isolated, or why it is not. */
export type Isolation =
  | { isolated: true; by: 'server' | 'service-worker' }
  /** why: a short reason for a reader; detail: the browser's own message, where there is one */
  | { isolated: false; why: string; detail?: string }
  /** the service worker is installed and the page is about to reload (this page never runs threads) */
  | { isolated: false; reloading: true; why: string };

/** The service worker, next to the pages (its scope is their folder). */
const WORKER = './coi-sw.js';
/** sessionStorage key set just before the one reload, so that the reloaded page does not reload again. */
const RELOADED = 'qkv-coi-reloaded';
/** How long an installing service worker may take to activate. */
const ACTIVATE_MS = 10_000;

function session(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage blocked: no way to remember the reload, so none is attempted
  }
}

/** Who added the isolation headers to this page: the service worker marks the responses it changed. */
async function isolatedBy(): Promise<'server' | 'service-worker'> {
  if (!navigator.serviceWorker?.controller) return 'server';
  try {
    const r = await fetch(location.href, { method: 'HEAD', cache: 'no-store' });
    return r.headers.get('X-QKV-Isolation') === 'service-worker' ? 'service-worker' : 'server';
  } catch {
    return 'service-worker';
  }
}

const timeout = (ms: number, what: string) =>
  new Promise<never>((_ok, fail) => setTimeout(() => fail(new Error(what)), ms));

async function decide(): Promise<Isolation> {
  const store = session();
  const reloaded = store?.getItem(RELOADED) === location.pathname;
  store?.removeItem(RELOADED);
  if (window.crossOriginIsolated) return { isolated: true, by: await isolatedBy() };
  if (!window.isSecureContext) return { isolated: false, why: 'not a secure context: a service worker needs https or localhost' };
  const sw = navigator.serviceWorker;
  if (!sw) return { isolated: false, why: 'this browser offers no service worker here (a private window?)' };
  if (reloaded) return { isolated: false, why: 'the service worker is installed, yet the reloaded page is not isolated' };
  if (!store) return { isolated: false, why: 'storage is blocked, so the page cannot reload once to use its service worker' };
  try {
    await sw.register(WORKER, { scope: './' });
    await Promise.race([sw.ready, timeout(ACTIVATE_MS, `it did not activate within ${ACTIVATE_MS / 1000} s`)]);
  } catch (e) {
    return { isolated: false, why: 'the service worker could not install', detail: String((e as Error)?.message ?? e) };
  }
  store.setItem(RELOADED, location.pathname);
  location.reload();
  return { isolated: false, reloading: true, why: 'service worker installed; reloading once to become cross-origin isolated' };
}

/** This page's isolation, decided once (the registration and the reload start at import). */
export const isolation: Promise<Isolation> = decide();

/**
 * The isolation, once the page will not reload; on the page that reloads, never. A page awaits
 * it before loading qkv, so that no wasm build starts loading in a document about to go away.
 */
export const settled: Promise<Isolation> = isolation.then((i) => ('reloading' in i ? new Promise<never>(() => {}) : i));
