//! The training threads: the calling thread plus helpers that wait for work by spinning.
//!
//! A training step forks and joins about fifty times, and most of its pieces of work take 5 to 40 µs. A
//! general-purpose pool puts an idle worker to sleep, or makes it yield to the kernel, and on a virtual
//! machine waking it costs as much as the piece of work. A helper here spins on an atomic counter instead,
//! so it starts a new job within a fraction of a microsecond; it only goes to sleep after [`SPIN`] without
//! work (between runs, or while a checkpoint is written).
//!
//! Work is handed out only as independent items (rows of a product, blocks of GELU, whole tensors), and
//! item `i` always runs on thread `i mod threads`, so every thread count gives the same bits.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle helper spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

/// One job: called once on each thread with that thread's index.
type Job<'a> = dyn Fn(usize) + Sync + 'a;

thread_local! {
    /// The team of the current [`with_team`] call on this thread.
    static TEAM: RefCell<Option<Arc<Team>>> = const { RefCell::new(None) };
    /// Set while this thread runs a team job: work it forks then runs on this thread alone.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

/// What the calling thread and its helpers share.
struct Shared {
    /// Counts the jobs handed out; a helper waits for it to change.
    generation: AtomicUsize,
    /// The current job, valid while `finished` is below the number of helpers (see [`Team::run`]).
    job: Mutex<Option<&'static Job<'static>>>,
    /// Helpers done with the current job.
    finished: AtomicUsize,
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

impl Team {
    fn new(threads: usize) -> std::io::Result<Team> {
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            job: Mutex::new(None),
            finished: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let mut team = Team {
            threads,
            shared: shared.clone(),
            helpers: Vec::new(),
        };
        for index in 1..threads {
            let shared = shared.clone();
            let helper = std::thread::Builder::new()
                .name(format!("s5-helper-{index}"))
                .spawn(move || helper(&shared, index))?;
            team.helpers.push(helper);
        }
        Ok(team)
    }

    /// Runs `job(t)` on every thread t (the caller is thread 0) and returns when all are done.
    fn run(&self, job: &Job<'_>) {
        let shared = &self.shared;
        // SAFETY: the helpers only call `job` between the generation bump below and their `finished`
        // increment, and `wait` (run on return and on unwind alike) does not return before every helper
        // has made that increment and the slot is cleared. So `job` is never used after this call ends.
        let job = unsafe { std::mem::transmute::<&Job<'_>, &'static Job<'static>>(job) };
        *shared.job.lock().unwrap() = Some(job);
        shared.finished.store(0, SeqCst);
        shared.generation.fetch_add(1, SeqCst);
        if shared.sleeping.load(SeqCst) > 0 {
            let _lock = shared.sleep.lock().unwrap();
            shared.wake.notify_all();
        }
        let wait = WaitForHelpers(self);
        in_job(|| job(0));
        drop(wait);
        if shared.panicked.swap(false, SeqCst) {
            panic!("a training thread panicked");
        }
    }
}

/// Waits until every helper has finished the current job, then clears it; see [`Team::run`].
struct WaitForHelpers<'a>(&'a Team);

impl Drop for WaitForHelpers<'_> {
    fn drop(&mut self) {
        let shared = &self.0.shared;
        while !spin_round(|| shared.finished.load(SeqCst) == self.0.helpers.len()) {}
        *shared.job.lock().unwrap() = None;
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        self.shared.generation.fetch_add(1, SeqCst);
        drop(self.shared.sleep.lock().unwrap());
        self.shared.wake.notify_all();
        for helper in self.helpers.drain(..) {
            let _ = helper.join();
        }
    }
}

/// A helper's life: wait for a new generation, run its part of the job, report, repeat.
fn helper(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        seen = wait_for_job(shared, seen);
        if shared.stop.load(SeqCst) {
            return;
        }
        let job = shared
            .job
            .lock()
            .unwrap()
            .expect("a job comes with its generation");
        if catch_unwind(AssertUnwindSafe(|| in_job(|| job(index)))).is_err() {
            shared.panicked.store(true, SeqCst);
        }
        shared.finished.fetch_add(1, SeqCst);
    }
}

/// Spins until the generation moves past `seen`, sleeping if that takes longer than [`SPIN`].
fn wait_for_job(shared: &Shared, seen: usize) -> usize {
    let started = Instant::now();
    loop {
        if spin_round(|| shared.generation.load(SeqCst) != seen) {
            return shared.generation.load(SeqCst);
        }
        if started.elapsed() > SPIN {
            let mut lock = shared.sleep.lock().unwrap();
            shared.sleeping.fetch_add(1, SeqCst);
            // Checked again under the lock: `run` bumps the generation before it looks for sleepers.
            while shared.generation.load(SeqCst) == seen {
                lock = shared.wake.wait(lock).unwrap();
            }
            shared.sleeping.fetch_sub(1, SeqCst);
            return shared.generation.load(SeqCst);
        }
    }
}

/// Checks `done()` for a few rounds of spinning, then yields the processor once, and says whether it came
/// true. The yield matters when there are more threads than cores: without it, a thread could spin through
/// whole time slices while the thread it waits for cannot run.
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
/// forks below; 0 means one per core.
pub fn with_team<R>(threads: usize, f: impl FnOnce() -> R) -> std::io::Result<R> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let team = Arc::new(Team::new(threads)?);
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

/// Calls `f` on every item, item `i` on thread `i mod threads`. Items are independent pieces of work,
/// e.g. `(output rows, input rows)` pairs.
pub fn for_each<I: Send>(items: impl IntoIterator<Item = I>, f: impl Fn(I) + Sync) {
    let Some(team) = current() else {
        return items.into_iter().for_each(f);
    };
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    team.run(&|t| {
        for item in items.iter().skip(t).step_by(team.threads) {
            let item = item.lock().unwrap().take();
            f(item.expect("each item is taken once"));
        }
    });
}

/// Runs `a` on this thread and `b` on a helper, and returns both results.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_go_to_fixed_threads_and_all_run() {
        let seen: Vec<Mutex<Option<String>>> = (0..7).map(|_| Mutex::new(None)).collect();
        with_team(3, || {
            assert_eq!(threads(), 3);
            for_each(0..7, |i| {
                assert_eq!(threads(), 1, "work forked inside a job stays on its thread");
                let name = std::thread::current().name().map(str::to_owned);
                *seen[i].lock().unwrap() = Some(name.unwrap_or_default());
            });
        })
        .unwrap();
        let names: Vec<String> = seen
            .into_iter()
            .map(|s| s.into_inner().unwrap().unwrap())
            .collect();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(name, &names[i % 3], "item {i}");
        }
        assert_eq!(names[1], "s5-helper-1");
        assert_eq!(threads(), 1, "no team after with_team returns");
    }

    #[test]
    fn join_returns_both_results_and_helpers_wake_after_sleeping() {
        with_team(2, || {
            for pause in [0, 2] {
                std::thread::sleep(Duration::from_millis(pause)); // longer than SPIN: the helper sleeps
                let (a, b) = join(
                    || 6 * 7,
                    || std::thread::current().name().map(str::to_owned),
                );
                assert_eq!((a, b.as_deref()), (42, Some("s5-helper-1")));
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
