// Cross-origin isolation for the panels: shared memory between workers, so that training uses every core.
//
// A page has shared memory only where it is `crossOriginIsolated`, which takes two response headers that
// static servers (GitHub Pages, `python3 -m http.server`, `mdbook serve`) do not send. The book's own
// service worker, `coi-sw.js` at the root of each edition, adds them. This script registers it, and when
// the worker has taken control of a page that is not isolated yet (the first visit), reloads the page once.
// Where service workers cannot run (file://, plain http to a host other than localhost, a browser or
// private mode without them) it does nothing, and the panels run on one thread.
//
// The panels read what happened from
//     window.attentionIsolation = { isolated, reason, ready }
// `isolated` is self.crossOriginIsolated; `reason` is null when isolated, else one word that a panel turns
// into its one line (theme/play-labels.js):
//     "file"          opened from file://
//     "insecure"      not https, nor localhost: browsers give service workers only to secure pages
//     "unsupported"   the browser has no service workers here (some private modes, or turned off)
//     "failed"        the worker could not be registered (the error is logged to the console), or
//                     did not become active within 10 s
//     "reloading"     the worker has just taken control: the page reloads into isolation
//     "refused"       the page was reloaded once and is still not isolated (the browser does not
//                     isolate this way); it is not reloaded again in this tab
//     "pending"       the worker is being installed (then "reloading", or "failed")
// `ready` is a promise of the same object once the outcome is final (isolated, or one of the reasons
// but "pending" and "reloading"): a panel that waits for it never starts work that a reload throws away.
// An event "attention-isolation" is dispatched on window whenever `reason` changes.
(function () {
    "use strict";
    const RELOADED = "attention-isolation-reloaded"; // sessionStorage key: this tab reloaded once already
    const state = { isolated: self.crossOriginIsolated === true, reason: null, ready: null };
    let settle;
    state.ready = new Promise((resolve) => {
        settle = resolve;
    });
    window.attentionIsolation = state;

    function say(reason) {
        state.reason = reason;
        if (reason !== "pending" && reason !== "reloading") {
            settle(state);
        }
        window.dispatchEvent(new CustomEvent("attention-isolation", { detail: state }));
    }

    // sessionStorage may be missing or refuse to be written (private modes, storage turned off); without
    // it a reload could not be guarded against repeating, so there is none.
    function reloadedBefore() {
        try {
            return window.sessionStorage.getItem(RELOADED) === "1";
        } catch (e) {
            return true;
        }
    }

    function reloadOnce() {
        if (reloadedBefore()) {
            say("refused");
            return;
        }
        try {
            window.sessionStorage.setItem(RELOADED, "1");
        } catch (e) {
            say("refused");
            return;
        }
        say("reloading");
        window.location.reload();
    }

    if (state.isolated) {
        settle(state);
        try {
            window.sessionStorage.removeItem(RELOADED); // a later visit may reload once again
        } catch (e) {
            // nothing to forget
        }
        return;
    }
    if (window.location.protocol === "file:") {
        say("file");
        return;
    }
    if (!window.isSecureContext) {
        say("insecure");
        return;
    }
    if (!("serviceWorker" in navigator)) {
        say("unsupported");
        return;
    }
    // The worker lives at the root of this edition (mdBook's path_to_root: "" on a top page, "../" one
    // folder down, and the Chinese edition's root is its zh-CN/ folder), and controls the pages below it.
    const root = typeof path_to_root === "string" ? path_to_root : "";
    say("pending");
    // Installing the worker takes a moment (it caches nothing); one that never becomes active (a browser
    // that blocks service workers without saying so) leaves the page on one thread.
    window.setTimeout(() => {
        if (state.reason === "pending") {
            say("failed");
        }
    }, 10000);
    navigator.serviceWorker
        .register(root + "coi-sw.js")
        .then(() => navigator.serviceWorker.ready)
        .then(() => {
            // The worker is active. Controlling this page already (it claims open pages when it
            // starts) or not (a reload that bypassed it), the next load of the page goes through it.
            reloadOnce();
        })
        .catch((error) => {
            // Some private modes expose navigator.serviceWorker but refuse registrations.
            console.warn("attention-from-scratch: the service worker for cross-origin isolation could not be registered:", error);
            say(error && error.name === "SecurityError" ? "unsupported" : "failed");
        });
})();
