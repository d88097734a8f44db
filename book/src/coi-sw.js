// The book's service worker: it makes the pages cross-origin isolated, so that the panels may share
// WebAssembly memory between workers and train on every core.
//
// Shared memory (SharedArrayBuffer) is only given to a page that its server sends with
//     Cross-Origin-Opener-Policy: same-origin
//     Cross-Origin-Embedder-Policy: require-corp
// A static server (GitHub Pages, `python3 -m http.server`, `mdbook serve`) sends neither, so this worker
// answers each of the book's own requests from the network, as the server answers it, and adds the two
// headers (and Cross-Origin-Resource-Policy: same-origin to what a page loads). Requests to other origins
// are left alone: the book loads nothing from elsewhere (`.ci/check_self_contained.py` checks that), which
// is what makes `require-corp` safe.
//
// theme/isolation.js registers it from the book's root (each edition's: `zh-CN/` has its own copy), and
// reloads a page once when the worker has just taken control of it. Nothing is cached: every answer is
// the network's.

"use strict";

self.addEventListener("install", () => {
    // A new version takes over at once instead of waiting for every tab of the book to close.
    self.skipWaiting();
});

self.addEventListener("activate", (event) => {
    // Control the pages already open, so that isolation.js can reload them into isolation.
    event.waitUntil(self.clients.claim());
});

/** The response with the isolation headers added; `document` for pages (navigations). */
function isolated(response, document) {
    // A redirect a navigation must follow itself, or an opaque answer: passed on untouched (their
    // headers cannot be read or changed; a followed redirect comes back through this worker).
    if (response.type === "opaqueredirect" || response.type === "opaque" || response.status === 0) {
        return response;
    }
    const headers = new Headers(response.headers);
    headers.set("Cross-Origin-Embedder-Policy", "require-corp");
    if (document) {
        headers.set("Cross-Origin-Opener-Policy", "same-origin");
    } else {
        headers.set("Cross-Origin-Resource-Policy", "same-origin");
    }
    return new Response(response.body, {
        status: response.status,
        statusText: response.statusText,
        headers,
    });
}

self.addEventListener("fetch", (event) => {
    const request = event.request;
    if (new URL(request.url).origin !== self.location.origin) {
        return; // not the book's: the browser's own handling
    }
    // A request that may only be answered from the browser's cache, with a mode other than same-origin,
    // cannot be fetched again from here (the developer tools make such requests): leave it alone.
    if (request.cache === "only-if-cached" && request.mode !== "same-origin") {
        return;
    }
    const document = request.mode === "navigate" || request.destination === "document";
    event.respondWith(fetch(request).then((response) => isolated(response, document)));
});
