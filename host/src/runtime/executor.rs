//! Where guest code runs, and how much of it runs at once.
//!
//! Wasm is CPU-bound and runs until it returns, traps or is interrupted. Run
//! on the async worker threads that also poll sockets, a few spinning calls
//! starve the I/O driver, and `/health` or another plugin's call waits for
//! the spinners' time slices. So no guest code runs there:
//!
//! - A call of a small plugin starts where its caller is, for one slice:
//!   a store yields after [`SLICE_FUEL`] units of fuel (a fraction of a
//!   millisecond of wasm), so a short call (most calls: instantiate, a few
//!   microseconds of guest code, return) ends there with no hop to
//!   another thread and back, which cost more than the call itself (perf:
//!   two futex wake-ups and two context switches per call, 40 % of the
//!   samples of an echo call). A call still running after its first slice
//!   (it yielded, or it waits on a timer or a socket) moves, as it is, to
//!   a guest thread for the rest. A large plugin's call (see `inline` on
//!   [`Executor::run`]) starts on a guest thread, since instantiating it
//!   alone takes a millisecond or more that no slice interrupts, unless
//!   it found a spare instance made ahead: then nothing is left to
//!   instantiate, and it starts where its caller is too.
//! - Everything else (including `list-tools` at load time) runs on a
//!   thread of its own, taken from the blocking pool of a small tokio
//!   runtime that belongs to the guests. That runtime's single worker
//!   thread only drives the timers and sockets the guests use (sleeping,
//!   outbound HTTP); it never runs wasm itself, so it is never starved.
//! - Call threads run at a lower scheduling priority (nice 10), so the
//!   kernel prefers the HTTP front and other short calls when cores are
//!   busy; a spinning call still gets every idle cycle.
//! - At most `max_calls` run at once (one slot each). A call that finds no
//!   free slot waits [`QUEUE_WAIT`], then is refused as busy. The pooling
//!   allocator is sized from the same number, so instantiation never fails
//!   for want of a pool slot.
//! - A call whose caller has gone away (a closed connection, say) is
//!   interrupted at the next epoch tick rather than left to run out its
//!   deadline.
//! - The epoch ticker sleeps while no call runs: an idle server does
//!   nothing.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use wasmtime::Engine;

/// How much fuel (about one unit per wasm instruction) a store burns
/// between yields: the length of a slice, well under a millisecond of
/// optimised code. A call's first slice may run on its caller's thread;
/// on a guest thread, a yield costs a fiber switch and nothing else.
pub(crate) const SLICE_FUEL: u64 = 200_000;

/// How long a call waits for a free slot before it is refused as busy.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_millis(250);

/// How often the epoch advances while calls run: the granularity of
/// deadlines and of cancellation.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The scheduling priority of threads that run guest code (see above).
const GUEST_NICE: i32 = 10;

/// Why the executor did not run a job.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Every slot was taken for the whole wait.
    Busy { max_calls: usize },
    /// The job panicked (a host bug, never a guest trap).
    Panicked(String),
}

pub(crate) struct Executor {
    /// `Option` so that `Drop` can shut it down without blocking.
    guests: Option<tokio::runtime::Runtime>,
    slots: Arc<tokio::sync::Semaphore>,
    max_calls: usize,
    running: Arc<Running>,
    /// Calls waiting for a slot now.
    waiting: AtomicUsize,
    /// Unused pool slots trimmed so far.
    trimmed: Arc<AtomicU64>,
}

/// Set when the caller of a job has gone away; the job's epoch callback
/// reads it and interrupts the guest.
#[derive(Clone, Default)]
pub(crate) struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sets the flag when dropped: the caller's future owns it.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        (self.0).0.store(true, Ordering::Relaxed);
    }
}

impl Executor {
    /// `engines` are those whose epochs the ticker advances.
    pub(crate) fn new(max_calls: usize, engines: &[&Engine]) -> std::io::Result<Self> {
        let max_calls = max_calls.max(1);
        let guests = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            // Guest calls, plus the blocking file I/O that WASI does for
            // them.
            .max_blocking_threads(max_calls + 16)
            .thread_name("toolhost-guest")
            .enable_all()
            .build()?;
        let running = Arc::new(Running::default());
        let trimmed = Arc::new(AtomicU64::new(0));
        spawn_epoch_ticker(engines, running.clone(), trimmed.clone());
        Ok(Executor {
            guests: Some(guests),
            slots: Arc::new(tokio::sync::Semaphore::new(max_calls)),
            max_calls,
            running,
            waiting: AtomicUsize::new(0),
            trimmed,
        })
    }

    /// The guests' runtime: work that belongs with guest code but not
    /// with a call (a large store's teardown after its call answered)
    /// goes there, off the front's threads, whichever thread the call
    /// ended on.
    pub(crate) fn guests(&self) -> tokio::runtime::Handle {
        self.guests
            .as_ref()
            .expect("the guest runtime lives as long as the executor")
            .handle()
            .clone()
    }

    pub(crate) fn max_calls(&self) -> usize {
        self.max_calls
    }

    /// How many unused pool slots have been trimmed so far.
    pub(crate) fn slots_trimmed(&self) -> u64 {
        self.trimmed.load(Ordering::Relaxed)
    }

    pub(crate) fn calls_waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    pub(crate) fn slots_in_use(&self) -> usize {
        self.max_calls
            .saturating_sub(self.slots.available_permits())
    }

    /// Runs `job` once a slot is free, and waits for it; answers with its
    /// output and the CPU time its polls took, on whichever threads. With
    /// `inline`, the first slice runs here (see the module's notes), the
    /// rest on a guest thread; without, all of it on a guest thread. If
    /// this future is dropped, the job's [`Cancel`] is set.
    pub(crate) async fn run<F, Fut, T>(
        &self,
        inline: bool,
        job: F,
    ) -> Result<(T, Duration), Refusal>
    where
        F: FnOnce(Cancel) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        // A free slot is taken at once, without making the queue's clock.
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let acquired =
                    tokio::time::timeout(QUEUE_WAIT, self.slots.clone().acquire_owned()).await;
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                match acquired {
                    Ok(Ok(permit)) => permit,
                    _ => {
                        return Err(Refusal::Busy {
                            max_calls: self.max_calls,
                        });
                    }
                }
            }
        };
        let cancel = Cancel::default();
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let mut job = Metered {
            job: Box::pin(job(cancel)),
            cpu: Duration::ZERO,
            on_guest_thread: !inline,
        };
        if inline {
            let first = std::future::poll_fn(|cx| {
                Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| {
                    Pin::new(&mut job).poll(cx)
                })))
            })
            .await;
            match first {
                Ok(Poll::Ready(done)) => return Ok(done),
                Ok(Poll::Pending) => {}
                Err(panic) => return Err(Refusal::Panicked(panic_message(&*panic))),
            }
        }
        let handle = self.guests();
        let running = self.running.clone();
        let inner = handle.clone();
        let joined = handle
            .spawn_blocking(move || {
                let _permit = permit;
                let _running = running.enter();
                lower_thread_priority(GUEST_NICE);
                job.on_guest_thread = true;
                inner.block_on(job)
            })
            .await;
        joined.map_err(|error| Refusal::Panicked(error.to_string()))
    }
}

/// A job with the CPU time of its polls summed, so a job that moved
/// threads is measured whole. On a guest thread, that thread's own CPU
/// clock around each poll. The first slice on the caller's thread (at most
/// [`SLICE_FUEL`] of guest code, and all of most calls) is timed by the
/// monotonic clock instead: it does not block, so its time is CPU time
/// unless the thread was descheduled during it, and that clock is read in
/// 27 ns where the thread's CPU clock is a system call of 675 ns here (two
/// per call, 12 % of an echo call's samples).
struct Metered<Fut> {
    job: Pin<Box<Fut>>,
    cpu: Duration,
    on_guest_thread: bool,
}

impl<Fut: Future> Future for Metered<Fut> {
    type Output = (Fut::Output, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let polled = if self.on_guest_thread {
            let before = thread_cpu_time();
            let polled = self.job.as_mut().poll(cx);
            self.cpu += thread_cpu_time().saturating_sub(before);
            polled
        } else {
            let before = std::time::Instant::now();
            let polled = self.job.as_mut().poll(cx);
            self.cpu += before.elapsed();
            polled
        };
        polled.map(|output| (output, self.cpu))
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.running.close();
        if let Some(guests) = self.guests.take() {
            guests.shutdown_background();
        }
    }
}

/// How many jobs run guest code now; the epoch ticker waits on it.
#[derive(Default)]
struct Running {
    state: Mutex<RunningState>,
    changed: Condvar,
}

#[derive(Default)]
struct RunningState {
    count: usize,
    closed: bool,
}

struct RunningGuard(Arc<Running>);

impl Running {
    fn enter(self: &Arc<Self>) -> RunningGuard {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.count += 1;
        self.changed.notify_all();
        RunningGuard(self.clone())
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.changed.notify_all();
    }

    /// Blocks while nothing runs, for at most `quiet` if given.
    fn wait_for_work(&self, quiet: Option<Duration>) -> Waited {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let idle = |state: &mut RunningState| state.count == 0 && !state.closed;
        let state = match quiet {
            None => self
                .changed
                .wait_while(state, idle)
                .unwrap_or_else(|e| e.into_inner()),
            Some(quiet) => {
                self.changed
                    .wait_timeout_while(state, quiet, idle)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        match (state.closed, state.count) {
            (true, _) => Waited::Closed,
            (false, 0) => Waited::Quiet,
            _ => Waited::Work,
        }
    }
}

/// What [`Running::wait_for_work`] saw.
enum Waited {
    Work,
    /// Nothing ran for the whole wait.
    Quiet,
    /// The executor is gone.
    Closed,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.count -= 1;
    }
}

/// Advances the engines' epochs while calls run, and sleeps otherwise.
/// Once calls have run and then none for [`QUIET_BEFORE_TRIM`], gives the
/// pages of the pool's unused memory slots back to the kernel, once.
fn spawn_epoch_ticker(engines: &[&Engine], running: Arc<Running>, trimmed: Arc<AtomicU64>) {
    let weak: Vec<_> = engines.iter().map(|engine| engine.weak()).collect();
    std::thread::Builder::new()
        .name("toolhost-epoch".into())
        .spawn(move || {
            let mut ran = false;
            loop {
                match running.wait_for_work(ran.then_some(QUIET_BEFORE_TRIM)) {
                    Waited::Closed => return,
                    Waited::Quiet => {
                        ran = false;
                        trimmed.fetch_add(trim_unused_memories(&weak), Ordering::Relaxed);
                    }
                    Waited::Work => {
                        ran = true;
                        for engine in &weak {
                            let Some(engine) = engine.upgrade() else {
                                return;
                            };
                            engine.increment_epoch();
                        }
                        std::thread::sleep(EPOCH_TICK);
                    }
                }
            }
        })
        .expect("spawning the epoch thread");
}

/// How long no guest code runs before the pool's unused memory slots are
/// trimmed: long enough that a room calling its tools every few seconds
/// keeps them. A source's first call after a trim faults its pages in
/// again: one run (serve profile, `bench/scripts/sources_reach.py`'s
/// source importing bs4 and dateutil), 12-37 ms after 3 s of quiet against
/// 12-16 ms after 1.5 s (untrimmed) and 2.1 ms back to back.
const QUIET_BEFORE_TRIM: Duration = Duration::from_secs(5);

/// Gives back the pages that the engines' unused pool slots hold. A freed
/// slot keeps what its last instance touched mapped: the pages its reset
/// kept resident (up to `pool.rs`'s keep-resident size) and every image
/// page the instance read, counted in the process's RSS once per slot
/// (thirty live Python sources left 120 MiB of RSS in the image pages
/// their slots had read, over 50 MiB of images). Kept while calls run
/// (the next instance in the slot would fault them in again); given back
/// once the server is quiet. A slot keeps its image mapped either way.
fn trim_unused_memories(engines: &[wasmtime::EngineWeak]) -> u64 {
    let started = std::time::Instant::now();
    let trimmed: usize = engines
        .iter()
        .filter_map(|engine| engine.upgrade())
        .map(|engine| engine.trim_unused_memories())
        .sum();
    tracing::debug!(
        slots = trimmed,
        ms = started.elapsed().as_secs_f64() * 1e3,
        "unused pool slots trimmed, the server being quiet"
    );
    trimmed as u64
}

/// Lowers the calling thread's priority to `nice`, once per thread (Linux:
/// `setpriority` on a thread id affects that thread only). Best effort: a
/// failure changes nothing but fairness.
pub(crate) fn lower_thread_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    {
        thread_local!(static LOWERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
        if LOWERED.with(|lowered| lowered.replace(true)) {
            return;
        }
        // SAFETY: plain syscalls on the current thread; no memory is shared.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, nice);
        }
    }
}

/// The CPU time the calling thread has used.
pub(crate) fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
