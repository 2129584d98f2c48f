//! A source version's image: the language runtime's state after it has run
//! the author's module (imports included) and listed its tools, and
//! nothing of a caller's. Taken once per version and grants, off the call
//! path, by comparing that instance's memory with a fresh instance's page
//! by page; given to each fresh instance before its call, so the module's
//! work is not paid again. Every call still starts from its own copy: an
//! image is read, never written.
//!
//! Given how: mapped (`Image::map`), the runtime's code made into a
//! component whose memory starts from the image, wasmtime mapping the
//! pages that differ from the runtime's own image copy-on-write over it
//! (vendor/wasmtime/PATCHED.md), so a fresh instance costs one mapping
//! and a call faults in only what it touches; or, where that cannot be
//! (the bound), written: the pages that differ copied into each fresh
//! instance through the runtime's state functions.
//!
//! What an image holds is the runtime's memory (the pages that differ from
//! a fresh instance's, and those it grew) and every mutable global. The
//! WASI adapter's state is reset before it is taken, so it holds no
//! handle of the instance it came from: the instance it is laid over makes
//! its own. The preopened folders must be the same, in the same order, as
//! where it was taken: it is used only with the grants it was taken with.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use wasmtime::AsContextMut;
use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre, TypedFunc};

use super::bound::{Bound, Claim};
use super::instrument::STATE;
pub(crate) use super::mapped::Lay;
use super::mapped::{Laid, Layers, Mapped};
use crate::runtime::grants::Grants;
use crate::runtime::sandbox::Sandbox;

/// The page an image compares and keeps by.
const PAGE: usize = 4096;
/// How much of the memory one `read` copies out.
const CHUNK: u32 = 1 << 20;
/// Unchanged pages between two changed ones that are written with them
/// (a call into the instance costs more than copying them).
const GAP: usize = 4;
/// The most one image may hold, so that one source never takes the whole
/// of the images' bound.
const MAX_IMAGE: usize = 64 << 20;
/// The largest piece of an image held on its own, and shared with every
/// image that writes the same bytes at the same place.
const SHARED: usize = 64 << 10;
/// The most one call lays of an image, in 8-byte words (1 MiB): the scratch
/// memory it goes through, in each instance, is no bigger.
const BATCH_WORDS: usize = 128 << 10;

/// The instrumented runtime's state functions, found once per component.
#[derive(Clone, Copy)]
pub(crate) struct StateFuncs {
    globals: ComponentExportIndex,
    set_globals: ComponentExportIndex,
    pages: ComponentExportIndex,
    read: ComponentExportIndex,
    reset: ComponentExportIndex,
    grow_to: ComponentExportIndex,
    write_runs: ComponentExportIndex,
}

impl StateFuncs {
    /// The functions, if `component` is a runtime rewritten by
    /// [`super::instrument::instrument`].
    pub(crate) fn find(component: &Component) -> Option<StateFuncs> {
        let state = component.get_export_index(None, STATE)?;
        let func = |name| component.get_export_index(Some(&state), name);
        Some(StateFuncs {
            globals: func("globals")?,
            set_globals: func("set-globals")?,
            pages: func("pages")?,
            read: func("read")?,
            reset: func("reset")?,
            grow_to: func("grow-to")?,
            write_runs: func("write-runs")?,
        })
    }
}

/// Where a run goes, and a hash of its bytes.
type RunKey = (u32, u64);
/// What a fresh instance of one runtime's code holds, while that code (of
/// whatever type the engine keeps it in) lives.
type FreshOf = (Weak<dyn std::any::Any + Send + Sync>, Arc<FreshPages>);
/// The runs held, by key (two runs may share one).
type RunsHeld = HashMap<RunKey, Vec<Weak<Run>>>;

/// The runs of bytes all images hold, each held once however many images
/// share it (thirty sources importing the same packages write mostly the
/// same pages at the same places), and their bound. A run is at most
/// `SHARED` bytes, within one multiple of it.
pub(crate) struct ImageStore {
    bound: Bound,
    /// The most runs of pages one mapped image lays over the runtime's own
    /// (each a mapping in every pool slot that holds the image).
    pub(super) max_runs: usize,
    /// Every run held now, by where it goes and a hash of its bytes; and
    /// how many entries there were when those no image holds were last
    /// forgotten.
    runs: Mutex<(RunsHeld, usize)>,
    /// What a fresh instance of each runtime's code holds: the same for
    /// every source of that runtime (a source is read only once it runs),
    /// so read once per code, while that code lives.
    fresh: Mutex<Vec<FreshOf>>,
    /// The layers images may be laid over, and their linked code.
    pub(crate) layers: Layers,
}

impl ImageStore {
    /// A store of at most `max` bytes, for a pool of `instances`.
    pub(crate) fn new(max: usize, instances: usize) -> Arc<ImageStore> {
        Arc::new(ImageStore {
            bound: Bound::new(max),
            // A process may hold 65,530 mappings (Linux's default
            // `vm.max_map_count`): the images' runs in every slot together
            // stay within a quarter of them.
            max_runs: (16_384 / instances.max(1)).clamp(1, 64),
            runs: Mutex::new((HashMap::new(), 0)),
            fresh: Mutex::new(Vec::new()),
            layers: Layers::default(),
        })
    }

    /// What a fresh instance of `code` holds, if it was read.
    pub(crate) fn fresh_of<C: Send + Sync + 'static>(
        &self,
        code: &Arc<C>,
    ) -> Option<Arc<FreshPages>> {
        let fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        fresh
            .iter()
            .find(|(of, _)| std::ptr::addr_eq(of.as_ptr(), Arc::as_ptr(code)))
            .map(|(_, pages)| pages.clone())
    }

    /// Keeps what a fresh instance of `code` holds, for as long as `code`
    /// lives.
    pub(crate) fn keep_fresh<C: Send + Sync + 'static>(
        &self,
        code: &Arc<C>,
        pages: Arc<FreshPages>,
    ) {
        let mut fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        fresh.retain(|(of, _)| {
            of.strong_count() > 0 && !std::ptr::addr_eq(of.as_ptr(), Arc::as_ptr(code))
        });
        let of: Weak<C> = Arc::downgrade(code);
        fresh.push((of, pages));
    }
    /// The run of `words` at `at`: one already held, or this one, if the
    /// bound has room for it.
    fn share(self: &Arc<Self>, at: u32, bytes: &[u8]) -> Option<Arc<Run>> {
        let hash = {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hasher);
            hasher.finish()
        };
        let same = |run: &Run| {
            run.words.len() * 8 == bytes.len()
                && run
                    .words
                    .iter()
                    .zip(bytes.chunks_exact(8))
                    .all(|(word, bytes)| word.to_le_bytes() == bytes)
        };
        let mut guard = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let (runs, pruned_at) = &mut *guard;
        if let Some(held) = runs.get(&(at, hash)) {
            for run in held.iter().filter_map(Weak::upgrade) {
                if same(&run) {
                    return Some(run);
                }
            }
        }
        let claim = self.claim(bytes.len())?;
        let run = Arc::new(Run {
            at,
            words: bytes
                .chunks_exact(8)
                .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")))
                .collect(),
            _claim: claim,
        });
        // Runs no image holds any more are forgotten as others come, once
        // the map has doubled since the last time.
        if runs.len() >= 2 * (*pruned_at).max(1024) {
            runs.retain(|_, held| {
                held.retain(|run| run.strong_count() > 0);
                !held.is_empty()
            });
            *pruned_at = runs.len();
        }
        runs.entry((at, hash))
            .or_default()
            .push(Arc::downgrade(&run));
        Some(run)
    }

    pub(super) fn claim(&self, bytes: usize) -> Option<Claim> {
        self.bound.claim(bytes)
    }

    /// The bytes held now, shared runs once.
    pub(crate) fn held(&self) -> usize {
        self.bound.held()
    }
}

/// Changed pages in a row, as the 8-byte words `write` takes (a page is a
/// whole number of them), and where they go.
struct Run {
    at: u32,
    words: Vec<u64>,
    _claim: Claim,
}

/// The buffers batches of runs are gathered in, kept between lays: a
/// buffer of `BATCH_WORDS` is past the allocator's threshold for mapping
/// its own pages, so one made per lay would be mapped, faulted in page by
/// page and unmapped at every fresh instance.
static BATCHES: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());
/// How many of those buffers are kept: one per core lays at a time.
fn batches_kept() -> usize {
    static KEPT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KEPT.get_or_init(|| std::thread::available_parallelism().map_or(4, |cores| cores.get()))
}

/// A buffer from [`BATCHES`], given back when dropped.
struct Batch(Vec<u64>);

impl Batch {
    fn take() -> Batch {
        let kept = BATCHES.lock().unwrap_or_else(|e| e.into_inner()).pop();
        Batch(kept.unwrap_or_else(|| Vec::with_capacity(BATCH_WORDS)))
    }
}

impl std::ops::Deref for Batch {
    type Target = Vec<u64>;
    fn deref(&self) -> &Vec<u64> {
        &self.0
    }
}

impl std::ops::DerefMut for Batch {
    fn deref_mut(&mut self) -> &mut Vec<u64> {
        &mut self.0
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        let mut buffer = std::mem::take(&mut self.0);
        buffer.clear();
        let mut kept = BATCHES.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < batches_kept() {
            kept.push(buffer);
        }
    }
}

/// The state an instance is given before its call.
pub(crate) struct Image {
    globals: Vec<u64>,
    pages: u32,
    /// The changed bytes, written into each fresh instance; none once the
    /// image is mapped.
    runs: Vec<Arc<Run>>,
    /// The image mapped copy-on-write, if it could be (see [`Image::map`]).
    mapped: Mutex<Option<Mapped>>,
}

/// Why an image was not kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageError {
    #[error("{0:#}")]
    Guest(wasmtime::Error),
    #[error("all images together would pass their bound of {0} MiB")]
    OverBound(usize),
    #[error("it would be more than its bound, at {0} MiB")]
    TooLarge(usize),
    #[error("it ran past the deadline")]
    PastDeadline,
    #[error(
        "its module runs in {:.1} ms, sooner than its image is laid ({:.1} ms)",
        module.as_secs_f64() * 1e3,
        image.as_secs_f64() * 1e3
    )]
    Slower {
        module: std::time::Duration,
        image: std::time::Duration,
    },
}

impl From<wasmtime::Error> for ImageError {
    fn from(error: wasmtime::Error) -> Self {
        ImageError::Guest(error)
    }
}

/// What a fresh instance's memory holds, page by page: a SHA-256 of each
/// page (truncated to 128 bits), read before the instance that runs the
/// module is made, so a take holds one instance at a time.
pub(crate) struct FreshPages {
    pages: u32,
    hashes: Vec<[u8; 16]>,
}

fn page_hash(page: &[u8]) -> [u8; 16] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(page);
    let mut hash = [0; 16];
    hash.copy_from_slice(&digest[..16]);
    hash
}

impl FreshPages {
    /// Reads `fresh`, an instance that has run nothing.
    pub(crate) async fn read<S: Send>(
        funcs: &StateFuncs,
        mut fresh: (impl AsContextMut<Data = S>, &Instance),
    ) -> wasmtime::Result<FreshPages> {
        let pages = pages_of(funcs, &mut fresh.0, fresh.1).await?;
        let end = u64::from(pages) << 16;
        let mut hashes = Vec::with_capacity((end as usize) / PAGE);
        let mut offset = 0u64;
        while offset < end {
            let len = (end - offset).min(u64::from(CHUNK)) as u32;
            let bytes = read(funcs, &mut fresh.0, fresh.1, offset as u32, len).await?;
            hashes.extend(bytes.chunks(PAGE).map(page_hash));
            offset += u64::from(len);
        }
        Ok(FreshPages { pages, hashes })
    }
}

impl Image {
    /// The image of `taken`, an instance that has run the author's module
    /// and nothing of a caller's, against `fresh`, what an instance of the
    /// same code holds before it has run anything. `taken`'s WASI adapter
    /// is reset. An image past `MAX_IMAGE` bytes is not kept.
    pub(crate) async fn take<S: Send>(
        funcs: &StateFuncs,
        store: &Arc<ImageStore>,
        mut taken: (impl AsContextMut<Data = S>, &Instance),
        fresh: &FreshPages,
    ) -> Result<(Image, Vec<u8>), ImageError> {
        let reset: TypedFunc<(), ()> = taken.1.get_typed_func(&mut taken.0, funcs.reset)?;
        reset.call_async(&mut taken.0, ()).await?;
        let globals: TypedFunc<(), (Vec<u64>,)> =
            taken.1.get_typed_func(&mut taken.0, funcs.globals)?;
        let (globals,) = globals.call_async(&mut taken.0, ()).await?;
        let pages = pages_of(funcs, &mut taken.0, taken.1).await?;
        if pages < fresh.pages {
            return Err(ImageError::Guest(wasmtime::format_err!(
                "the memory shrank from {} to {pages} pages",
                fresh.pages
            )));
        }

        let end = u64::from(pages) << 16;
        let mut shared = Vec::new();
        let mut kept = 0usize;
        let mut offset = 0u64;
        let mut memory = Vec::with_capacity(end as usize);
        while offset < end {
            let len = (end - offset).min(u64::from(CHUNK)) as u32;
            let now = read(funcs, &mut taken.0, taken.1, offset as u32, len).await?;
            memory.extend_from_slice(&now);
            let first_page = offset as usize / PAGE;
            // The changed pages of this chunk, in runs: joined across a few
            // unchanged pages, cut where a shared piece ends.
            let mut runs: Vec<(usize, usize)> = Vec::new();
            for (page, bytes_now) in now.chunks(PAGE).enumerate() {
                let start = page * PAGE;
                let same = match fresh.hashes.get(first_page + page) {
                    Some(was) => *was == page_hash(bytes_now),
                    // Memory grown since is zeroed: only what is not
                    // needs writing.
                    None => bytes_now.iter().all(|b| *b == 0),
                };
                if same {
                    continue;
                }
                let end = start + bytes_now.len();
                match runs.last_mut() {
                    Some((run_start, run_end))
                        if *run_end + GAP * PAGE >= start
                            && *run_start / SHARED == start / SHARED =>
                    {
                        *run_end = end;
                    }
                    _ => runs.push((start, end)),
                }
            }
            for (start, end) in runs {
                kept += end - start;
                if kept > MAX_IMAGE {
                    return Err(ImageError::TooLarge(kept >> 20));
                }
                let at = (offset as usize + start) as u32;
                shared.push(
                    store
                        .share(at, &now[start..end])
                        .ok_or(ImageError::OverBound(store.bound.max >> 20))?,
                );
            }
            offset += u64::from(len);
        }
        Ok((
            Image {
                globals,
                pages,
                runs: shared,
                mapped: Mutex::new(None),
            },
            memory,
        ))
    }

    /// Maps the image copy-on-write (see [`Mapped`]) for `pre`, the
    /// runtime's code linked, from `memory`, the whole of the taken
    /// instance's memory: its runs are let go. Its layer holds the pages
    /// that differ from what it is laid over, and claims them from
    /// `store`'s bound. Unchanged on an error: where the image cannot be
    /// mapped (the bound, a runtime whose memory is not laid by images),
    /// it is written into each instance, as before.
    pub(crate) fn map(
        &mut self,
        store: &Arc<ImageStore>,
        pre: &InstancePre<Sandbox>,
        memory: &[u8],
    ) -> Result<(), String> {
        let laid = Laid::new(&store.layers, store.max_runs, pre, memory)?;
        // Its runs go as the file comes: the two are not held at once
        // against the bound.
        let runs = std::mem::take(&mut self.runs);
        let Some(claim) = store.claim(laid.held) else {
            self.runs = runs;
            return Err(format!(
                "all images together would pass their bound of {} MiB",
                store.bound.max >> 20
            ));
        };
        drop(runs);
        self.mapped = Mutex::new(Some(laid.claimed(&store.layers, claim)));
        Ok(())
    }

    /// How a fresh instance of `pre`, the code served now, is given this
    /// image.
    pub(crate) fn lay_for(&self, pre: &InstancePre<Sandbox>) -> Lay {
        match &*self.mapped.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(mapped) => mapped.lay_for(pre),
            None => Lay::Written,
        }
    }

    /// Whether it is mapped copy-on-write.
    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Sets every global of `instance`: made from the mapped code, or
    /// written (`apply`).
    pub(crate) async fn set_globals<S: Send>(
        &self,
        funcs: &StateFuncs,
        mut store: impl AsContextMut<Data = S>,
        instance: &Instance,
    ) -> wasmtime::Result<()> {
        let set_globals: TypedFunc<(&[u64],), ()> =
            instance.get_typed_func(&mut store, funcs.set_globals)?;
        set_globals
            .call_async(&mut store, (self.globals.as_slice(),))
            .await
    }

    /// Lays the image over `instance`, fresh: its memory grown to the
    /// image's size, the changed bytes written, every global set.
    pub(crate) async fn apply<S: Send>(
        &self,
        funcs: &StateFuncs,
        mut store: impl AsContextMut<Data = S>,
        instance: &Instance,
    ) -> wasmtime::Result<()> {
        let grow_to: TypedFunc<(u32,), ()> = instance.get_typed_func(&mut store, funcs.grow_to)?;
        grow_to.call_async(&mut store, (self.pages,)).await?;
        // Runs go in batches of up to `BATCH_WORDS`, one call each (a call
        // into the instance costs more than copying a few pages): each run
        // its offset, its length in words, its words.
        let write_runs: TypedFunc<(&[u64],), ()> =
            instance.get_typed_func(&mut store, funcs.write_runs)?;
        let mut batch = Batch::take();
        for run in &self.runs {
            if !batch.is_empty() && batch.len() + 2 + run.words.len() > BATCH_WORDS {
                write_runs
                    .call_async(&mut store, (batch.as_slice(),))
                    .await?;
                batch.clear();
            }
            batch.push(u64::from(run.at));
            batch.push(run.words.len() as u64);
            batch.extend_from_slice(&run.words);
        }
        if !batch.is_empty() {
            write_runs
                .call_async(&mut store, (batch.as_slice(),))
                .await?;
        }
        self.set_globals(funcs, store, instance).await
    }

    /// How many runs of bytes it writes.
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The bytes it holds: its runs, or the mapped file's pages.
    pub(crate) fn bytes(&self) -> usize {
        match &*self.mapped.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(mapped) => mapped.bytes(),
            None => self.runs.iter().map(|run| run.words.len() * 8).sum(),
        }
    }
}

async fn pages_of<S: Send>(
    funcs: &StateFuncs,
    mut store: impl AsContextMut<Data = S>,
    instance: &Instance,
) -> wasmtime::Result<u32> {
    let pages: TypedFunc<(), (u32,)> = instance.get_typed_func(&mut store, funcs.pages)?;
    Ok(pages.call_async(&mut store, ()).await?.0)
}

async fn read<S: Send>(
    funcs: &StateFuncs,
    mut store: impl AsContextMut<Data = S>,
    instance: &Instance,
    offset: u32,
    len: u32,
) -> wasmtime::Result<Vec<u8>> {
    let read: TypedFunc<(u32, u32), (Vec<u8>,)> =
        instance.get_typed_func(&mut store, funcs.read)?;
    Ok(read.call_async(&mut store, (offset, len)).await?.0)
}

/// What taking an image costs, roughly: an instance that runs the module,
/// its memory compared with a fresh one's, another given the image (about
/// 50 ms of CPU for a plain tool's 2.5 MB on this class of machine). A
/// quick module's image is taken only once the calls that ran it without
/// one have paid that much, so a source called once or twice (a burst of
/// publishes, each tried once; an edit loop) never pays for one.
pub(crate) const TAKING_COSTS: Duration = Duration::from_millis(50);

/// The fewest calls a quick module's version serves before its image is
/// taken: a source tried once never pays for one, whatever its module
/// took.
pub(crate) const TAKEN_AFTER_CALLS: u64 = 2;

/// A source version's image, as far as it has got: one per plugin version,
/// for the grants it was taken with; and what running its module has cost
/// the calls so far, which decides when a quick module's is taken.
#[derive(Default)]
pub(crate) struct ImageSlot {
    slot: Mutex<Slot>,
    /// What one run of the module took as it was last measured (an
    /// instance made, the module run, its tools listed), in microseconds.
    module_micros: AtomicU64,
    /// Calls served since the version started serving.
    calls: AtomicU64,
}

#[derive(Default)]
enum Slot {
    /// Not taken yet for the grants served now.
    #[default]
    Untried,
    /// Being taken.
    Taking,
    /// Taken with these grants.
    Ready(Arc<Grants>, Arc<Image>),
    /// Taking it failed, or it would pass the bound: calls run the module.
    Declined(Arc<Grants>),
}

impl ImageSlot {
    /// The image to lay over an instance with `grants`, if there is one.
    pub(crate) fn ready(&self, grants: &Arc<Grants>) -> Option<Arc<Image>> {
        match &*self.slot.lock().unwrap_or_else(|e| e.into_inner()) {
            Slot::Ready(taken_with, image) if Arc::ptr_eq(taken_with, grants) => {
                Some(image.clone())
            }
            _ => None,
        }
    }

    /// Whether an image is to be taken now for `grants` (and, if so, it is
    /// marked as being taken).
    pub(crate) fn start_taking(&self, grants: &Arc<Grants>) -> bool {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = match &*slot {
            Slot::Untried => true,
            Slot::Taking => false,
            Slot::Ready(taken_with, _) | Slot::Declined(taken_with) => {
                !Arc::ptr_eq(taken_with, grants)
            }
        };
        if wanted {
            *slot = Slot::Taking;
        }
        wanted
    }

    /// How taking it ended: kept, declined for these grants, or (a
    /// failure that was not the image's: no slot, the server stopping)
    /// to be tried again.
    pub(crate) fn taken(&self, grants: &Arc<Grants>, outcome: Option<Result<Image, ()>>) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        // Cleared meanwhile (the version stopped serving): nothing to keep.
        if !matches!(*slot, Slot::Taking) {
            return;
        }
        *slot = match outcome {
            Some(Ok(image)) => Slot::Ready(grants.clone(), Arc::new(image)),
            Some(Err(())) => Slot::Declined(grants.clone()),
            None => Slot::Untried,
        };
    }

    /// The image goes with the version's instances (`Runtime::unserved`).
    pub(crate) fn clear(&self) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Slot::Untried;
        self.calls.store(0, Ordering::Relaxed);
    }

    /// Keeps what one run of the module took (as the version was
    /// described, or as its image was taken).
    pub(crate) fn module_ran(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.module_micros.store(micros.max(1), Ordering::Relaxed);
    }

    /// Counts a call, and says whether the calls served so far have paid
    /// for taking the image: at least [`TAKEN_AFTER_CALLS`] of them, and
    /// their runs of the module [`TAKING_COSTS`] or more together (a
    /// module never measured counts as costing that much each time).
    pub(crate) fn called_and_paid(&self) -> bool {
        let calls = self.calls.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        let module = match self.module_micros.load(Ordering::Relaxed) {
            0 => u64::try_from(TAKING_COSTS.as_micros()).unwrap_or(u64::MAX),
            micros => micros,
        };
        calls >= TAKEN_AFTER_CALLS
            && calls.saturating_mul(module)
                >= u64::try_from(TAKING_COSTS.as_micros()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_modules_image_waits_for_its_calls_to_pay_for_it() {
        let slot = ImageSlot::default();
        slot.module_ran(Duration::from_millis(5));
        let paid: Vec<bool> = (0..12).map(|_| slot.called_and_paid()).collect();
        assert_eq!(paid.iter().position(|&paid| paid), Some(9), "{paid:?}");
        // A slow module pays at once, but never at the first call.
        let slow = ImageSlot::default();
        slow.module_ran(Duration::from_millis(80));
        assert!(!slow.called_and_paid());
        assert!(slow.called_and_paid());
        // A new version counts again.
        slot.clear();
        assert!(!slot.called_and_paid());
        // Never measured: as costly as the image.
        let unmeasured = ImageSlot::default();
        assert!(!unmeasured.called_and_paid());
        assert!(unmeasured.called_and_paid());
    }

    #[test]
    fn a_run_two_images_write_alike_is_held_once_and_the_bound_holds() {
        let store = ImageStore::new(3 * PAGE, 128);
        let page = vec![7u8; PAGE];
        let first = store.share(0, &page).unwrap();
        let again = store.share(0, &page).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(store.held(), PAGE);
        // The same bytes elsewhere, or other bytes here, are runs of their own.
        let elsewhere = store.share(PAGE as u32, &page).unwrap();
        let other = store.share(0, &[8u8; PAGE]).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(store.held(), 3 * PAGE);
        assert!(
            store.share(2 * PAGE as u32, &page).is_none(),
            "past the bound"
        );
        drop((first, again, elsewhere));
        assert_eq!(store.held(), PAGE);
        let back = store.share(0, &page).unwrap();
        assert_eq!(back.words.len() * 8, PAGE);
        assert_eq!(store.held(), 2 * PAGE);
        drop((other, back));
        assert_eq!(store.held(), 0);
    }
}
