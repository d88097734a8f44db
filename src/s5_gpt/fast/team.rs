//! Fast layer. The training threads: the calling thread plus helpers that wait for work by
//! spinning.
//!
//! A training step forks and joins about thirty times, and most of its pieces of work take 5 to 40
//! µs. A general-purpose pool puts an idle worker to sleep, or makes it yield to the kernel, and on
//! a virtual machine waking it costs as much as the piece of work. A helper here spins on an atomic
//! counter instead, so it starts a new job within a fraction of a microsecond; it only goes to
//! sleep after a few hundred µs without work (between runs, or while a checkpoint is written).
//!
//! Work is handed out only as independent items (bands of columns of a product, blocks of GELU,
//! blocks of AdamW), and each thread takes the next item not yet taken. Which thread runs an item
//! changes from run to run, but never what the item computes, so every thread count gives the same
//! bits. A helper that the machine has not scheduled in time simply gets no items: the calling thread
//! takes them all and does not wait.
//!
//! In the book's page (WebAssembly built with shared memory) the helpers are Web Workers that the
//! page starts, each of which calls `serve` (WebAssembly only); a team there is the calling thread
//! and the helpers served so far. Without them it is the calling thread alone.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long an idle helper spins before it sleeps.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))] // counted in rounds there (see `Spun`)
const SPIN: Duration = Duration::from_micros(300);

/// One job: called on the calling thread and on every helper that joins in time.
type Job<'a> = dyn Fn() + Sync + 'a;

/// In [`Shared::state`]: set once the calling thread has run out of work, after which no helper
/// joins.
const CLOSED: u64 = 1 << 31;
/// In [`Shared::state`]: the count of helpers that joined the current job.
const JOINED: u64 = CLOSED - 1;

thread_local! {
    /// The team of the current [`with_team`] call on this thread.
    static TEAM: RefCell<Option<Arc<Team>>> = const { RefCell::new(None) };
    /// Set while this thread runs a team job: work it forks then runs on this thread alone.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

/// What the calling thread and its helpers share.
struct Shared {
    /// `generation << 32 | CLOSED | joined`: the job's number (a helper waits for it to change),
    /// whether it is closed, and how many helpers joined it.
    state: AtomicU64,
    /// The current job, valid while a helper that joined has not finished (see [`Team::run`]).
    job: Mutex<Option<&'static Job<'static>>>,
    /// Helpers done with the current job.
    finished: AtomicU64,
    /// Set if a helper's part of the job panicked.
    panicked: AtomicBool,
    /// Helpers asleep on `wake`.
    sleeping: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Tells the helpers to exit.
    stop: AtomicBool,
}

/// The calling thread and `threads − 1` helpers.
struct Team {
    threads: usize,
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            state: AtomicU64::new(CLOSED),
            job: Mutex::new(None),
            finished: AtomicU64::new(0),
            panicked: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }
}

impl Team {
    /// The calling thread and `threads − 1` helpers of its own.
    #[cfg(not(target_arch = "wasm32"))]
    fn new(threads: usize) -> std::io::Result<Team> {
        let shared = Arc::new(Shared::new());
        let mut team = Team {
            threads,
            shared: shared.clone(),
            helpers: Vec::new(),
        };
        for index in 1..threads {
            let shared = shared.clone();
            let helper = std::thread::Builder::new()
                .name(format!("s5-helper-{index}"))
                .spawn(move || helper(&shared))?;
            team.helpers.push(helper);
        }
        Ok(team)
    }

    /// Runs `job` on this thread and on every helper that joins before this thread's call returns,
    /// and returns once all of those are done too.
    fn run(&self, job: &Job<'_>) {
        let shared = &self.shared;
        // SAFETY: a helper calls `job` only after joining (see `join_job`), and joining is impossible once
        // `WaitForHelpers` has closed the job; it then waits, on return and on unwind alike, until
        // every helper that joined has finished and the slot is cleared. So `job` is never used
        // after this call.
        let job = unsafe { std::mem::transmute::<&Job<'_>, &'static Job<'static>>(job) };
        *shared.job.lock().unwrap() = Some(job);
        shared.finished.store(0, SeqCst);
        shared.panicked.store(false, SeqCst);
        let generation = (shared.state.load(SeqCst) >> 32) + 1;
        shared.state.store(generation << 32, SeqCst);
        if shared.sleeping.load(SeqCst) > 0 {
            let _lock = shared.sleep.lock().unwrap();
            shared.wake.notify_all();
        }
        let wait = WaitForHelpers(shared);
        in_job(job);
        drop(wait);
        if shared.panicked.swap(false, SeqCst) {
            panic!("a training thread panicked");
        }
    }
}

/// Closes the current job to helpers, waits until every helper that joined has finished, then
/// clears the job; see [`Team::run`].
struct WaitForHelpers<'a>(&'a Shared);

impl Drop for WaitForHelpers<'_> {
    fn drop(&mut self) {
        let shared = self.0;
        let joined = shared.state.fetch_or(CLOSED, SeqCst) & JOINED;
        while !spin_round(|| shared.finished.load(SeqCst) == joined) {}
        *shared.job.lock().unwrap() = None;
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        if self.helpers.is_empty() {
            return; // no helpers of its own (one thread, or the page's, which stay)
        }
        self.shared.stop.store(true, SeqCst);
        self.shared.state.fetch_add(1 << 32, SeqCst);
        drop(self.shared.sleep.lock().unwrap());
        self.shared.wake.notify_all();
        for helper in self.helpers.drain(..) {
            let _ = helper.join();
        }
    }
}

/// A helper's life: wait for a new job, join it if it is still open, run it, report, repeat.
fn helper(shared: &Shared) {
    let mut seen = 0;
    loop {
        seen = wait_for_job(shared, seen);
        if shared.stop.load(SeqCst) {
            return;
        }
        if !join_job(shared, seen) {
            continue; // the calling thread already did all of it
        }
        let job = shared
            .job
            .lock()
            .unwrap()
            .expect("a job stays in its slot until its helpers finish");
        if catch_unwind(AssertUnwindSafe(|| in_job(job))).is_err() {
            shared.panicked.store(true, SeqCst);
        }
        shared.finished.fetch_add(1, SeqCst);
    }
}

/// Counts this helper into job `generation` if that job is still the current one and still open.
fn join_job(shared: &Shared, generation: u64) -> bool {
    let join = |state: u64| (state >> 32 == generation && state & CLOSED == 0).then_some(state + 1);
    shared.state.fetch_update(SeqCst, SeqCst, join).is_ok()
}

/// Spins until the job number moves past `seen`, sleeping if that takes longer than [`SPIN`].
fn wait_for_job(shared: &Shared, seen: u64) -> u64 {
    let generation = || shared.state.load(SeqCst) >> 32;
    let mut spun = Spun::start();
    loop {
        if spin_round(|| generation() != seen) {
            return generation();
        }
        if spun.long_enough() {
            let mut lock = shared.sleep.lock().unwrap();
            shared.sleeping.fetch_add(1, SeqCst);
            // Checked again under the lock: `run` moves to the next job before it looks for
            // sleepers.
            while generation() == seen {
                lock = shared.wake.wait(lock).unwrap();
            }
            shared.sleeping.fetch_sub(1, SeqCst);
            return generation();
        }
    }
}

/// Tells when an idle helper has spun for [`SPIN`]. WebAssembly in a page has no clock that
/// `std` can read, so there it counts rounds of [`spin_round`] instead.
struct Spun {
    #[cfg(not(target_arch = "wasm32"))]
    started: std::time::Instant,
    #[cfg(target_arch = "wasm32")]
    rounds: u32,
}

impl Spun {
    fn start() -> Spun {
        Spun {
            #[cfg(not(target_arch = "wasm32"))]
            started: std::time::Instant::now(),
            #[cfg(target_arch = "wasm32")]
            rounds: 0,
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn long_enough(&mut self) -> bool {
        self.started.elapsed() > SPIN
    }

    /// About [`SPIN`]: a round is 64 atomic loads, a few hundred nanoseconds.
    #[cfg(target_arch = "wasm32")]
    fn long_enough(&mut self) -> bool {
        self.rounds += 1;
        self.rounds > 1_000
    }
}

/// Checks `done()` for a few rounds of spinning, then yields the processor once, and says whether
/// it came true. The yield matters when there are more threads than cores: without it, a thread
/// could spin through whole time slices while the thread it waits for cannot run.
fn spin_round(done: impl Fn() -> bool) -> bool {
    for _ in 0..64 {
        if done() {
            return true;
        }
        std::hint::spin_loop();
    }
    std::thread::yield_now();
    done()
}

/// Runs `f` marked as team work, so that anything it forks stays on this thread.
fn in_job<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_JOB.set(self.0);
        }
    }
    let _reset = Reset(IN_JOB.replace(true));
    f()
}

/// Runs `f` with a team of `threads` threads (the calling thread and `threads − 1` helpers) for the
/// forks below; 0 means one per core. In the page, the helpers are those it started (see
/// `serve`), and 0 means all of them.
pub fn with_team<R>(threads: usize, f: impl FnOnce() -> R) -> std::io::Result<R> {
    #[cfg(target_arch = "wasm32")]
    let team = Arc::new(page::team(threads));
    #[cfg(not(target_arch = "wasm32"))]
    let team = Arc::new(Team::new(match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    })?);
    let previous = TEAM.replace(Some(team));
    struct Restore(Option<Option<Arc<Team>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            TEAM.set(self.0.take().unwrap());
        }
    }
    let _restore = Restore(Some(previous));
    Ok(f())
}

/// The team that work forked here would use: none inside a job, or outside [`with_team`].
fn current() -> Option<Arc<Team>> {
    if IN_JOB.get() {
        return None;
    }
    TEAM.with_borrow(|team| team.clone().filter(|team| team.threads > 1))
}

/// Threads that work forked here is shared among (1 inside a job, or outside [`with_team`]).
pub fn threads() -> usize {
    current().map_or(1, |team| team.threads)
}

/// Calls `f` on every item, each on whichever thread takes it first. Items are independent pieces
/// of work, e.g. `(output rows, input rows)` pairs.
pub fn for_each<I: Send>(items: impl IntoIterator<Item = I>, f: impl Fn(I) + Sync) {
    let Some(team) = current() else {
        return items.into_iter().for_each(f);
    };
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let next = AtomicUsize::new(0);
    team.run(&|| {
        while let Some(item) = items.get(next.fetch_add(1, SeqCst)) {
            let item = item.lock().unwrap().take();
            f(item.expect("each item is taken once"));
        }
    });
}

/// Runs `a` and `b`, on two threads if a helper is free, and returns both results.
pub fn join<RA: Send, RB: Send>(
    a: impl FnOnce() -> RA + Send,
    b: impl FnOnce() -> RB + Send,
) -> (RA, RB) {
    if threads() == 1 {
        return (a(), b());
    }
    let (mut ra, mut rb) = (None, None);
    let items: [Box<dyn FnOnce() + Send>; 2] =
        [Box::new(|| ra = Some(a())), Box::new(|| rb = Some(b()))];
    for_each(items, |f| f());
    (ra.unwrap(), rb.unwrap())
}

/// The helpers of the book's page: Web Workers that share this WebAssembly's memory, each blocked
/// in [`serve`] for the life of the page. Every team of the page hands its work to them.
#[cfg(target_arch = "wasm32")]
mod page {
    use super::*;
    use std::sync::LazyLock;

    /// What the page's teams and helpers share, and how many helpers serve.
    static HELPERS: LazyLock<(Arc<Shared>, AtomicUsize)> =
        LazyLock::new(|| (Arc::new(Shared::new()), AtomicUsize::new(0)));

    /// A team of up to `threads` threads: the calling one and the helpers served so far (0 means all
    /// of them).
    pub fn team(threads: usize) -> Team {
        let (shared, served) = &*HELPERS;
        let available = 1 + served.load(SeqCst);
        Team {
            threads: match threads {
                0 => available,
                n => n.min(available),
            },
            shared: shared.clone(),
            helpers: Vec::new(),
        }
    }

    /// Counts the calling Web Worker as a helper, then takes work as it comes, forever. It needs
    /// shared memory and a thread that may block (a worker, not the page's own).
    pub fn serve() -> ! {
        let (shared, served) = &*HELPERS;
        served.fetch_add(1, SeqCst);
        loop {
            helper(shared);
        }
    }
}

/// Makes the calling thread (a Web Worker of the book's page sharing this memory) one of the
/// page's helpers, for as long as the page lives: it never returns.
#[cfg(target_arch = "wasm32")]
pub use page::serve;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn every_item_runs_once_and_forks_inside_stay_on_their_thread() {
        let runs: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
        with_team(3, || {
            assert_eq!(threads(), 3);
            for_each(0..100, |i| {
                assert_eq!(threads(), 1, "work forked inside a job stays on its thread");
                runs[i].fetch_add(1, SeqCst);
            });
        })
        .unwrap();
        assert!(runs.iter().all(|r| r.load(SeqCst) == 1));
        assert_eq!(threads(), 1, "no team after with_team returns");
    }

    /// Two items that each wait until both have started: only two threads at once can finish them.
    fn rendezvous() -> u32 {
        let started = AtomicUsize::new(0);
        let item = |value: u32| {
            started.fetch_add(1, SeqCst);
            let deadline = Instant::now() + Duration::from_secs(20);
            while started.load(SeqCst) < 2 {
                assert!(Instant::now() < deadline, "no helper took the second item");
                std::thread::yield_now();
            }
            value
        };
        let (a, b) = join(|| item(6), || item(7));
        a * b
    }

    #[test]
    fn a_helper_takes_work_even_after_it_fell_asleep() {
        with_team(2, || {
            for pause in [0, 2] {
                std::thread::sleep(Duration::from_millis(pause)); // longer than SPIN: the helper sleeps
                assert_eq!(rendezvous(), 42);
            }
        })
        .unwrap();
    }

    #[test]
    fn a_panic_in_a_helper_reaches_the_caller() {
        let result = catch_unwind(|| {
            with_team(2, || for_each(0..2, |i| assert_ne!(i, 1, "item 1 fails"))).unwrap();
        });
        assert!(result.is_err());
    }
}
