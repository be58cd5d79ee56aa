// The demo's service worker: makes its pages cross-origin isolated on a host that sends no
// COOP/COEP headers (GitHub Pages, most CDNs), so SharedArrayBuffer and the wasm threads build
// are available. Registered by src/isolation.ts (scope: the folder this file is in); it re-serves
// every same-origin response with
//   Cross-Origin-Opener-Policy: same-origin
//   Cross-Origin-Embedder-Policy: require-corp
// and marks the ones it changed with X-QKV-Isolation: service-worker, so that a page can tell
// this from a server that sends the headers itself (responses that have them pass unchanged).
// Cross-origin requests (a Hugging Face download) are left to the browser: they are CORS fetches,
// which require-corp allows. The coi-serviceworker approach, written for this site.
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (new URL(request.url).origin !== self.location.origin) return;
  if (request.cache === 'only-if-cached' && request.mode !== 'same-origin') return;
  event.respondWith(isolated(request));
});

/** The network's response to `request`, with the isolation headers added where it lacks them. */
async function isolated(request) {
  const response = await fetch(request);
  // an opaque or redirect response (status 0) cannot be rewritten, nor needs to be
  if (response.status === 0) return response;
  const coop = response.headers.get('Cross-Origin-Opener-Policy');
  const coep = response.headers.get('Cross-Origin-Embedder-Policy');
  if (coop === 'same-origin' && (coep === 'require-corp' || coep === 'credentialless')) return response;
  const headers = new Headers(response.headers);
  headers.set('Cross-Origin-Opener-Policy', 'same-origin');
  headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
  headers.set('X-QKV-Isolation', 'service-worker');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
