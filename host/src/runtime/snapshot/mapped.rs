//! A source's image mapped copy-on-write: the runtime's code made into a
//! component whose memory starts from the image, the pages that differ
//! held in a sealed file of their own ([`Layer`]) and laid over the
//! runtime's own image or over a recent layer, whichever is nearer
//! (vendor/wasmtime/PATCHED.md). A fresh instance of it costs a few
//! mappings (kept in its pool slot between instances of the same source),
//! and a call faults in only the pages it touches.
//!
//! An image holds no compiled code: the code it is linked with is made
//! for the code that serves, and let go as soon as other code replaces it
//! (the optimised code replacing the baseline), every image's at once.

use std::sync::{Arc, Mutex, Weak};

use wasmtime::component::{ExportedMemoryImage, InstancePre};

use super::bound::Claim;
use super::instrument::MEMORY_EXPORT;
use crate::runtime::sandbox::Sandbox;

/// How many layers laid over the runtime's own image are tried as what a
/// new image is laid over: the most recent.
const LAYERS_TRIED: usize = 4;

/// The code an image is linked with, made for the code that serves; none
/// until a fresh instance needs it.
type Linked = Mutex<Option<InstancePre<Sandbox>>>;

/// The layers images may be laid over, and every mapped image's linked
/// code: part of the image store (`image.rs`).
#[derive(Default)]
pub(crate) struct Layers {
    /// The layers laid over the runtime's own image, most recent last.
    recent: Mutex<Vec<Weak<Layer>>>,
    /// Each mapped image's linked code.
    linked: Mutex<Vec<Weak<Linked>>>,
}

impl Layers {
    /// The most recent layers laid over the runtime's own image, live.
    fn recent(&self) -> Vec<Arc<Layer>> {
        let mut layers = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        layers.retain(|layer| layer.strong_count() > 0);
        layers
            .iter()
            .rev()
            .filter_map(Weak::upgrade)
            .take(LAYERS_TRIED)
            .collect()
    }

    fn keep(&self, layer: &Arc<Layer>) {
        let mut layers = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        layers.push(Arc::downgrade(layer));
        if layers.len() > 4 * LAYERS_TRIED {
            layers.remove(0);
        }
    }

    fn link(&self, linked: &Arc<Linked>) {
        let mut all = self.linked.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|linked| linked.strong_count() > 0);
        all.push(Arc::downgrade(linked));
    }

    /// Lets go of every image's linked code, after a runtime's code was
    /// replaced: each is linked again, with the code that serves, at its
    /// next fresh instance. The replaced code (tens of MiB of a Python
    /// runtime's baseline code, mapped) goes once nothing else holds it,
    /// rather than at each image's next call.
    pub(crate) fn code_replaced(&self) {
        let mut all = self.linked.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|linked| match linked.upgrade() {
            Some(linked) => {
                *linked.lock().unwrap_or_else(|e| e.into_inner()) = None;
                true
            }
            None => false,
        });
    }
}

/// A source's image mapped: its layer and its linked code.
pub(crate) struct Mapped {
    linked: Arc<Linked>,
    layer: Arc<Layer>,
}

/// The pages of one mapped image that differ from what it is laid over,
/// in a sealed file of their own: over the runtime's own image, or over
/// another source's layer where that one is nearer (thirty sources that
/// import the same packages differ from each other in a few pages, and
/// from the runtime in megabytes). Held while any image laid over it is.
pub(crate) struct Layer {
    /// The image (what another is laid over), holding no compiled code.
    image: ExportedMemoryImage,
    /// The file's share of the images' bound.
    claim: Claim,
    /// The layer beneath, whose file is mapped under this one's.
    _over: Option<Arc<Layer>>,
}

/// How a fresh instance is given an image.
pub(crate) enum Lay {
    /// Made from this code, whose memory starts from the image: only the
    /// globals are set.
    Mapped(InstancePre<Sandbox>),
    /// Made from the runtime's code, then the changed bytes written.
    Written,
    /// Not at all: the image cannot be mapped for the code that serves,
    /// so the instance runs the module itself.
    Not,
}

/// An image laid, before it is claimed from the bound.
pub(crate) struct Laid {
    image: ExportedMemoryImage,
    over: Option<Arc<Layer>>,
    /// The bytes its file holds.
    pub(crate) held: usize,
}

impl Laid {
    /// Lays `memory` (the whole of the taken instance's memory) for
    /// `pre`, the runtime's code linked: over whichever is nearest, the
    /// runtime's own image or a recent layer over it.
    /// Each layer's runs of pages are at most half of `max_runs`.
    pub(crate) fn new(
        layers: &Layers,
        max_runs: usize,
        pre: &InstancePre<Sandbox>,
        memory: &[u8],
    ) -> Result<Laid, String> {
        let runtime = pre.component();
        let why = |error: wasmtime::Error| format!("{error:#}");
        let mut over: Option<Arc<Layer>> = None;
        let mut least = runtime
            .memory_image_cost(MEMORY_EXPORT, memory, None)
            .map_err(why)?;
        for layer in layers.recent() {
            if let Ok(cost) = runtime.memory_image_cost(MEMORY_EXPORT, memory, Some(&layer.image))
                && cost < least
            {
                (least, over) = (cost, Some(layer));
            }
        }
        // Each layer's runs are mappings in every pool slot that holds the
        // image: two layers share the budget.
        let max_runs = (max_runs / 2).max(1);
        let laid = |over: Option<&Arc<Layer>>| {
            runtime.with_memory_image(
                MEMORY_EXPORT,
                memory,
                max_runs,
                over.map(|layer| &layer.image),
            )
        };
        let (component, held) = match laid(over.as_ref()) {
            Ok(laid) => laid,
            // Over the runtime's own, then.
            Err(_) if over.is_some() => {
                over = None;
                laid(None).map_err(why)?
            }
            Err(error) => return Err(why(error)),
        };
        let image = component
            .exported_memory_image(MEMORY_EXPORT)
            .map_err(why)?;
        Ok(Laid { image, over, held })
    }

    /// The image mapped, its file's bytes claimed.
    pub(crate) fn claimed(self, layers: &Layers, claim: Claim) -> Mapped {
        let first = self.over.is_none();
        let layer = Arc::new(Layer {
            image: self.image,
            claim,
            _over: self.over,
        });
        if first {
            layers.keep(&layer);
        }
        let linked = Arc::new(Mutex::new(None));
        layers.link(&linked);
        Mapped { linked, layer }
    }
}

impl Mapped {
    /// How a fresh instance of `pre`, the code served now, is given the
    /// image: the code linked with it, made once per code.
    pub(crate) fn lay_for(&self, pre: &InstancePre<Sandbox>) -> Lay {
        let mut linked = self.linked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(linked) = linked.as_ref()
            && linked.component().image_range() == pre.component().image_range()
        {
            return Lay::Mapped(linked.clone());
        }
        match pre
            .component()
            .with_memory_image_of(MEMORY_EXPORT, &self.layer.image)
            .and_then(|component| pre.for_imaged(component))
        {
            Ok(pre) => {
                *linked = Some(pre.clone());
                Lay::Mapped(pre)
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "a source's image could not be mapped for the code now served: its calls run its module");
                Lay::Not
            }
        }
    }

    /// The bytes its file holds.
    pub(crate) fn bytes(&self) -> usize {
        self.layer.claim.bytes()
    }
}
