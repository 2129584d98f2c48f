//! Publishing as the fronts ask for it: what one publish of a source does,
//! from its text to what serves ([`source`]: the language's runtime or a
//! build, the load, the room's record), one call every front makes.
//! Below it: `builds/` (a component of a source's own) and the registry's
//! publishing (`registry/publish.rs`: the file put in place and loaded).

pub(crate) mod source;
