//! The runtime's side of source images (`snapshot/`): taking a source's
//! image (at its load, from the instance that described it, or later as a
//! spare is made), keeping it only where it pays, and laying it over a
//! fresh instance before a call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::Store;

use super::Runtime;
use crate::runtime::compiled::CompiledPlugin;
use crate::runtime::compiler::Code;
use crate::runtime::executor::Cancel;
use crate::runtime::exports::Plugin;
use crate::runtime::grants::Grants;
use crate::runtime::sandbox::Sandbox;
use crate::runtime::snapshot::image::{FreshPages, Image, ImageError, Lay, StateFuncs};

/// A source whose module ran this long as it was described has its image
/// taken then, before it serves (reading the runtime's memory costs a few
/// tens of milliseconds): its first call starts from the image. A quicker
/// module serves at once, and its image is taken (or found not worth it)
/// as a spare is made, once its calls have paid for it
/// (`ImageSlot::called_and_paid`).
pub(super) const TAKE_AT_LOAD_FROM: Duration = Duration::from_millis(100);

/// What taking one source's image works with.
pub(super) struct Taking<'a> {
    pub(super) plugin: &'a CompiledPlugin,
    pub(super) code: &'a Code,
    pub(super) funcs: &'a StateFuncs,
    pub(super) grants: &'a Arc<Grants>,
    pub(super) cancel: &'a Cancel,
}

impl Taking<'_> {
    /// A store of its own, with these grants.
    fn store(&self, runtime: &Runtime) -> wasmtime::Result<Store<Sandbox>> {
        Ok(runtime.new_store(
            self.plugin,
            self.code,
            self.grants,
            None,
            self.cancel.clone(),
        )?)
    }

    /// A fresh instance of the runtime, with these grants, in a store of
    /// its own.
    async fn instance(&self, runtime: &Runtime) -> wasmtime::Result<(Store<Sandbox>, Plugin)> {
        let mut store = self.store(runtime)?;
        let instance = self.code.pre.instantiate_async(&mut store).await?;
        Ok((store, instance))
    }
}

impl Runtime {
    /// Whether `plugin` with `grants` is to have an image taken now (and,
    /// if so, it is marked as being taken): a source on a runtime that
    /// gives images, serving fresh instances, with none taken or being
    /// taken for these grants.
    pub(super) fn wants_image(&self, plugin: &CompiledPlugin, grants: &Arc<Grants>) -> bool {
        plugin.code.load().pre.state().is_some()
            && grants.source.is_some()
            && grants.reuse_instance.is_none()
            && plugin.image.start_taking(grants)
    }

    /// What a fresh instance of `plugin`'s code holds: read once per code
    /// (every source of a runtime starts from the same memory), in a store
    /// dropped before the next is made, as a call holds one instance.
    pub(super) async fn fresh_pages(
        &self,
        taking: &Taking<'_>,
    ) -> wasmtime::Result<Arc<FreshPages>> {
        if let Some(pages) = self.images.fresh_of(&taking.plugin.code) {
            return Ok(pages);
        }
        let (mut fresh, instance) = taking.instance(self).await?;
        let pages =
            Arc::new(FreshPages::read(taking.funcs, (&mut fresh, instance.instance())).await?);
        self.images.keep_fresh(&taking.plugin.code, pages.clone());
        Ok(pages)
    }

    /// Reads what a fresh instance of a runtime's code holds, ahead of its
    /// first source (as the runtime is compiled ahead at start-up), so
    /// that describing that source can take its image at once. Blocking:
    /// call it off the async runtime's worker threads.
    pub(super) fn read_fresh_ahead(self: &Arc<Self>, plugin: &CompiledPlugin) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if plugin.code.load().pre.state().is_none() {
            return;
        }
        let (runtime, job_plugin) = (self.clone(), plugin.clone());
        let read = handle.block_on(self.run(false, move |cancel| async move {
            let plugin = job_plugin;
            let code = plugin.code.load_full();
            let funcs = *code.pre.state().expect("checked above");
            let grants = Arc::new(runtime.no_grants());
            let taking = Taking {
                plugin: &plugin,
                code: &code,
                funcs: &funcs,
                grants: &grants,
                cancel: &cancel,
            };
            Ok(runtime.fresh_pages(&taking).await.map(|_| ()))
        }));
        if let Ok((Err(error), _)) = read {
            tracing::warn!(plugin = %plugin.name, error = %format!("{error:#}"), "a fresh instance's memory could not be read: its first source's image waits for a spare");
        }
    }

    /// Maps `image` where it can be, and keeps it only if a fresh instance
    /// given it lists the tools again; a written one, only if that
    /// instance was also ready sooner than `module_ran`, what an instance
    /// took to run the module and list them: a plain tool's module runs
    /// sooner than an image of a few MB is written, and keeps running.
    pub(super) async fn verified(
        &self,
        taking: &Taking<'_>,
        (mut image, memory): (Image, Vec<u8>),
        module_ran: Duration,
    ) -> Result<Image, ImageError> {
        if let Err(why) = image.map(&self.images, taking.code.pre.instance_pre(), &memory) {
            tracing::info!(plugin = %taking.plugin.name, %why, "a source's image is not mapped: it is written into each instance");
        }
        drop(memory);
        let started = Instant::now();
        let mut given = taking.store(self)?;
        let instance = Self::imaged_instance(taking.code, taking.funcs, &image, &mut given)
            .await?
            .ok_or_else(|| wasmtime::format_err!("the image could not be mapped"))?;
        taking.code.pre.list_tools(&mut given, &instance).await?;
        let laid = started.elapsed();
        // A mapped image costs an instance a few mappings, whatever its
        // size (and this first instance its cold start): only a written
        // one is weighed against the module.
        if !image.is_mapped() && laid >= module_ran {
            return Err(ImageError::Slower {
                module: module_ran,
                image: laid,
            });
        }
        Ok(image)
    }

    /// Keeps how taking `plugin`'s image ended, and says so: `None` when
    /// it failed for a reason not the image's (no slot, the server
    /// stopping), to be tried again.
    pub(super) fn image_taken(
        &self,
        plugin: &CompiledPlugin,
        grants: &Arc<Grants>,
        outcome: Option<Result<Image, ImageError>>,
        started: Instant,
    ) {
        let outcome = match outcome {
            Some(Ok(image)) => {
                tracing::info!(
                    plugin = %plugin.name,
                    bytes = image.bytes(),
                    runs = image.runs(),
                    mapped = image.is_mapped(),
                    all_images_hold = self.images.held(),
                    seconds = started.elapsed().as_secs_f64(),
                    "image taken: calls start where its module left off"
                );
                Some(Ok(image))
            }
            Some(Err(declined @ ImageError::Slower { .. })) => {
                tracing::info!(plugin = %plugin.name, %declined, "no image of this source: each call runs its module");
                Some(Err(()))
            }
            Some(Err(error)) => {
                tracing::warn!(plugin = %plugin.name, %error, "no image of this source: each call runs its module");
                Some(Err(()))
            }
            None => None,
        };
        plugin.image.taken(grants, outcome);
        // What reading instances' memories freed goes back now.
        crate::runtime::allocator::release_free_memory();
    }

    /// Takes a source's image on the executor, off any call's path, as its
    /// spares are made, when its load did not (its grants changed since,
    /// or the load's take failed for want of a slot): one instance runs
    /// the author's module and lists its tools, its memory is compared
    /// with a fresh instance's, and another, given the image, must list
    /// the tools again, sooner, before it is kept. A failure is logged and
    /// leaves the source's calls running its module, as before.
    pub(super) fn take_image(self: &Arc<Self>, plugin: &CompiledPlugin, grants: &Arc<Grants>) {
        // Only with a slot free now, as a spare: it never queues ahead of
        // a call. The next call's refill tries again.
        if self.calls_waiting() > 0
            || self.calls_running() >= self.max_calls()
            || !self.wants_image(plugin, grants)
        {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            plugin.image.taken(grants, None);
            return;
        };
        let (runtime, plugin, grants) = (self.clone(), plugin.clone(), grants.clone());
        handle.spawn(async move {
            let maker = runtime.clone();
            let (job_plugin, job_grants) = (plugin.clone(), grants.clone());
            let started = Instant::now();
            let taken = runtime
                .run(false, move |cancel| async move {
                    let (plugin, grants) = (job_plugin, job_grants);
                    let code = plugin.code.load_full();
                    let funcs = *code.pre.state().expect("checked above");
                    let taking = Taking {
                        plugin: &plugin,
                        code: &code,
                        funcs: &funcs,
                        grants: &grants,
                        cancel: &cancel,
                    };
                    let outcome = tokio::time::timeout(grants.limits.timeout, async {
                        let fresh = maker.fresh_pages(&taking).await?;
                        let module_started = Instant::now();
                        let (mut ran, instance) = taking.instance(&maker).await?;
                        code.pre.list_tools(&mut ran, &instance).await?;
                        let module_ran = module_started.elapsed();
                        plugin.image.module_ran(module_ran);
                        let image = Image::take(
                            &funcs,
                            &maker.images,
                            (&mut ran, instance.instance()),
                            &fresh,
                        )
                        .await;
                        drop(ran);
                        Ok::<_, wasmtime::Error>(match image {
                            Ok(image) => maker.verified(&taking, image, module_ran).await,
                            Err(declined) => Err(declined),
                        })
                    })
                    .await;
                    Ok(match outcome {
                        _ if cancel.is_set() => None,
                        Ok(Ok(outcome)) => Some(outcome),
                        Ok(Err(error)) => Some(Err(ImageError::Guest(error))),
                        Err(_) => Some(Err(ImageError::PastDeadline)),
                    })
                })
                .await;
            let outcome = match taken {
                Ok((outcome, _)) => outcome,
                Err(_) => None,
            };
            runtime.image_taken(&plugin, &grants, outcome, started);
        });
    }

    /// A fresh instance of `plugin`'s code for a call with `grants`: given
    /// the source's image if one is taken for them, or running the
    /// source's module itself.
    pub(super) async fn fresh_instance(
        plugin: &CompiledPlugin,
        code: &Code,
        grants: &Arc<Grants>,
        store: &mut Store<Sandbox>,
    ) -> wasmtime::Result<Plugin> {
        if let (Some(funcs), Some(image)) = (code.pre.state(), plugin.image.ready(grants)) {
            match Self::imaged_instance(code, funcs, &image, store).await? {
                Some(instance) => return Ok(instance),
                // Mapped for code no longer served, and not for this one:
                // taken again, as for new grants.
                None => plugin.image.clear(),
            }
        }
        code.pre
            .instantiate_async(store)
            .instrument(tracing::debug_span!("instantiate"))
            .await
    }

    /// A fresh instance of `code` given `image`: made from the code with
    /// the image mapped into its memory, then its globals set; or made
    /// from the code, then the image's bytes written. `None` when the
    /// image is mapped for other code and cannot be for this.
    async fn imaged_instance(
        code: &Code,
        funcs: &StateFuncs,
        image: &Image,
        store: &mut Store<Sandbox>,
    ) -> wasmtime::Result<Option<Plugin>> {
        Ok(Some(match image.lay_for(code.pre.instance_pre()) {
            Lay::Mapped(pre) => {
                let instance = code
                    .pre
                    .instantiate_from(&pre, &mut *store)
                    .instrument(tracing::debug_span!("instantiate"))
                    .await?;
                image
                    .set_globals(funcs, &mut *store, instance.instance())
                    .await?;
                instance
            }
            Lay::Written => {
                let instance = code
                    .pre
                    .instantiate_async(&mut *store)
                    .instrument(tracing::debug_span!("instantiate"))
                    .await?;
                image
                    .apply(funcs, &mut *store, instance.instance())
                    .instrument(tracing::debug_span!("image"))
                    .await?;
                instance
            }
            Lay::Not => return Ok(None),
        }))
    }
}
