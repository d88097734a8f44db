// A helper of the training team (a module Web Worker, started by worker.js in the threads build): it
// instantiates the same WebAssembly with the trainer's shared memory, then calls serve_as_helper,
// which never returns: from then on the worker takes pieces of each training step, as a native
// helper thread of `s5_gpt --threads N` does. It computes nothing of its own.
//
// The one message it gets is {glue, module, memory}: the build's JavaScript glue (a URL), its compiled
// WebAssembly and the memory to share. It answers {ok: true} just before it starts serving, or
// {ok: false, error} if it cannot.
self.onmessage = async (event) => {
    const { glue, module, memory } = event.data;
    let play;
    try {
        play = await import(glue);
        play.initSync({ module, memory });
    } catch (e) {
        self.postMessage({ ok: false, error: String(e && e.message ? e.message : e) });
        return;
    }
    self.postMessage({ ok: true });
    play.serve_as_helper();
};
