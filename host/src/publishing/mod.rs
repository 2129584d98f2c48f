//! The write side of the plugin folder: what people put into it and what
//! is kept of that, above the registry, which only serves what is there.
//!
//! - [`publish`]: `Publishing`, one publish or removal of a file (locks,
//!   shares, the upload, the file put in place and loaded, the
//!   publish record beside it) and the room's log of outcomes (`Noted`);
//! - [`source`]: one publish of Python or JavaScript source, from its text
//!   to what serves (the language's runtime or a build), the call every
//!   front makes;
//! - [`approving`]: an admin's decision on a version held for approval;
//! - [`skills`]: a skill published, removed or approved;
//! - [`audit`]: the folder's audit log (who changed what);
//! - [`shared`]: publishes and removals shared by replicas through Redis
//!   (`--redis`); [`following`]: each replica following them;
//!   [`replicate`]: each applied to this replica's folder;
//!   [`shared_line`]: the room's build line; [`shared_builds`]: builds
//!   handed to whichever replica has a free slot.
//!
//! Below it: `registry/` (which versions serve, approvals' records) and
//! `builds/` (a component of a source's own).

pub(crate) mod approving;
pub(crate) mod audit;
pub(crate) mod following;
pub(crate) mod publish;
pub(crate) mod replicate;
pub(crate) mod shared;
pub(crate) mod shared_builds;
pub(crate) mod shared_line;
pub(crate) mod skills;
pub(crate) mod source;
