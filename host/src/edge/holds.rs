//! What each person holds of the server's connections: so that one
//! person's streams and slow bodies never take the last free slots.
//!
//! - **Requests in flight** ([`Ticket::claim`]): every request the guard
//!   admits is its person's until its answer has been sent whole (a stream
//!   until it ends, a slow body until it is read). One person holds at most
//!   `--max-connections-per-person` at once; past that, 503 `BUSY` before
//!   a byte of the body is read. A person is their token's name; without
//!   one (an open server, the page's files) the client's address.
//! - **The reserve**: past `--max-connections`, a few more connections
//!   ([`reserve_of`]) are taken, for the probes (`/health`, `/ready`), the
//!   admins, and people with nothing else in flight; anyone else's request
//!   on one is refused with 503 `BUSY`. People hold at most half of the
//!   reserve at once (a stream on one holds it): the other half is the
//!   probes' and admins', whoever else arrived first.
//! - **Streams** ([`Holds::stream`]): `GET /events`, MCP's GET stream and
//!   `subscriptions/listen` together, at most `--max-streams-per-person`
//!   open at once per person (429-like 503 `BUSY` past it).
//!
//! Admins are never limited here: they are the ones who must get in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::edge::auth::{Identity, Role};

/// Who holds a connection: a person, or an address for a request with no
/// token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Holder {
    Person(String),
    Address(IpAddr),
}

impl Holder {
    fn of(identity: Option<&Identity>, peer: IpAddr) -> Holder {
        match identity {
            Some(identity) => Holder::Person(identity.name.clone()),
            None => Holder::Address(peer),
        }
    }

    fn describe(&self) -> String {
        match self {
            Holder::Person(name) => format!("{name:?}"),
            Holder::Address(address) => format!("the client at {address}"),
        }
    }
}

/// The limits, and what each holder holds now.
pub(crate) struct Holds {
    per_person: usize,
    streams_per_person: usize,
    /// How many of the reserve's connections people may hold at once.
    reserve_for_people: usize,
    requests: Mutex<HashMap<Holder, usize>>,
    streams: Mutex<HashMap<Holder, usize>>,
    /// People's requests on reserve connections now.
    on_reserve: Mutex<usize>,
}

/// Why a request or stream was refused here.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(
        "{who} already has {held} requests in flight (streams and bodies still being sent \
         count), the most one person may (--max-connections-per-person); finish or close one"
    )]
    OverShare { who: String, held: usize },
    #[error(
        "the server is at its --max-connections, and its last connections are kept for \
         /health, admins and people with nothing else in flight: {who} has a request in flight"
    )]
    Reserved { who: String },
    #[error(
        "the server is at its --max-connections, and the part of its last connections that \
         people may hold is taken; the rest is kept for /health and admins: try again shortly"
    )]
    ReserveTaken,
    #[error(
        "{who} already has {held} streams open (GET /events, MCP's GET stream and \
         subscriptions/listen together), the most one person may (--max-streams-per-person); \
         close one first"
    )]
    TooManyStreams { who: String, held: usize },
}

impl Refused {
    /// The limit it names, for `details.limit`.
    pub(crate) fn limit(&self) -> &'static str {
        match self {
            Refused::OverShare { .. } => "--max-connections-per-person",
            Refused::Reserved { .. } | Refused::ReserveTaken => "--max-connections",
            Refused::TooManyStreams { .. } => "--max-streams-per-person",
        }
    }
}

/// How many connections past `--max-connections` are kept for the probes,
/// the admins and people with nothing in flight.
pub(crate) fn reserve_of(max_connections: usize) -> usize {
    (max_connections / 16).max(4)
}

impl Holds {
    /// The holds of a server of `max_connections`.
    pub(crate) fn new(
        per_person: usize,
        streams_per_person: usize,
        max_connections: usize,
    ) -> Arc<Holds> {
        Arc::new(Holds {
            per_person: per_person.max(1),
            streams_per_person: streams_per_person.max(1),
            reserve_for_people: reserve_of(max_connections) / 2,
            requests: Mutex::default(),
            streams: Mutex::default(),
            on_reserve: Mutex::default(),
        })
    }

    /// A stream for `identity` (from `peer`), counted until the returned
    /// hold is dropped; refused past their `--max-streams-per-person`.
    pub(crate) fn stream(
        self: &Arc<Self>,
        identity: Option<&Identity>,
        peer: Option<IpAddr>,
    ) -> Result<Hold, Refused> {
        if identity.is_some_and(|identity| identity.role == Role::Admin) {
            return Ok(Hold::none());
        }
        let holder = Holder::of(identity, peer.unwrap_or(IpAddr::from([0, 0, 0, 0])));
        let mut streams = lock(&self.streams);
        let held = streams.entry(holder.clone()).or_default();
        if *held >= self.streams_per_person {
            return Err(Refused::TooManyStreams {
                who: holder.describe(),
                held: *held,
            });
        }
        *held += 1;
        Ok(Hold {
            holds: Some((self.clone(), holder, Kind::Stream)),
            on_reserve: false,
        })
    }

    fn release(&self, holder: &Holder, kind: Kind, on_reserve: bool) {
        if on_reserve {
            let mut taken = lock(&self.on_reserve);
            *taken = taken.saturating_sub(1);
        }
        let mut map = match kind {
            Kind::Request => lock(&self.requests),
            Kind::Stream => lock(&self.streams),
        };
        if let Some(held) = map.get_mut(holder) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                map.remove(holder);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Request,
    Stream,
}

/// One request or stream counted for its holder until dropped (and one of
/// people's places on the reserve, when `on_reserve`).
#[must_use]
pub(crate) struct Hold {
    holds: Option<(Arc<Holds>, Holder, Kind)>,
    on_reserve: bool,
}

impl Hold {
    fn none() -> Hold {
        Hold {
            holds: None,
            on_reserve: false,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some((holds, holder, kind)) = self.holds.take() {
            holds.release(&holder, kind, self.on_reserve);
        }
    }
}

/// What the listener hands each request: where its connection came from,
/// whether it is one of the reserve, and a place for the hold the guard
/// claims, which the listener keeps until the answer is sent whole.
#[derive(Clone)]
pub(crate) struct Ticket {
    holds: Arc<Holds>,
    pub(crate) peer: IpAddr,
    reserve: bool,
    claimed: Arc<Mutex<Option<Hold>>>,
}

impl Ticket {
    pub(crate) fn new(holds: Arc<Holds>, peer: IpAddr, reserve: bool) -> Ticket {
        Ticket {
            holds,
            peer,
            reserve,
            claimed: Arc::default(),
        }
    }

    /// Counts this request for `identity` (a probe's for nobody), or why
    /// it may not be made now.
    pub(crate) fn claim(&self, identity: Option<&Identity>, probe: bool) -> Result<(), Refused> {
        if probe || identity.is_some_and(|identity| identity.role == Role::Admin) {
            return Ok(());
        }
        let holder = Holder::of(identity, self.peer);
        let mut requests = lock(&self.holds.requests);
        let held = requests.entry(holder.clone()).or_default();
        if self.reserve && *held > 0 {
            return Err(Refused::Reserved {
                who: holder.describe(),
            });
        }
        if *held >= self.holds.per_person {
            return Err(Refused::OverShare {
                who: holder.describe(),
                held: *held,
            });
        }
        if self.reserve {
            let mut taken = lock(&self.holds.on_reserve);
            if *taken >= self.holds.reserve_for_people {
                return Err(Refused::ReserveTaken);
            }
            *taken += 1;
        }
        *held += 1;
        drop(requests);
        *lock(&self.claimed) = Some(Hold {
            holds: Some((self.holds.clone(), holder, Kind::Request)),
            on_reserve: self.reserve,
        });
        Ok(())
    }

    /// The hold claimed for this request, for the answer to keep.
    pub(crate) fn take(&self) -> Option<Hold> {
        lock(&self.claimed).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(name: &str, role: Role) -> Identity {
        Identity::named(name, role)
    }

    #[test]
    fn one_person_holds_their_share_and_the_reserve_keeps_room_for_others() {
        let holds = Holds::new(2, 1, 64);
        let peer = IpAddr::from([127, 0, 0, 1]);
        let ada = person("ada", Role::Caller);
        let mut kept = Vec::new();
        for _ in 0..2 {
            let ticket = Ticket::new(holds.clone(), peer, false);
            ticket.claim(Some(&ada), false).unwrap();
            kept.push(ticket.take().unwrap());
        }
        let third = Ticket::new(holds.clone(), peer, false);
        assert!(matches!(
            third.claim(Some(&ada), false),
            Err(Refused::OverShare { held: 2, .. })
        ));
        // On a reserve connection: the probes, an admin, and someone with
        // nothing in flight; not ada.
        let reserve = Ticket::new(holds.clone(), peer, true);
        assert!(reserve.claim(None, true).is_ok());
        assert!(
            reserve
                .claim(Some(&person("bob", Role::Admin)), false)
                .is_ok()
        );
        assert!(matches!(
            reserve.claim(Some(&ada), false),
            Err(Refused::Reserved { .. })
        ));
        reserve
            .claim(Some(&person("carol", Role::Caller)), false)
            .unwrap();
        drop(kept.pop());
        third.claim(Some(&ada), false).unwrap();

        let stream = holds.stream(Some(&ada), None).unwrap();
        assert!(holds.stream(Some(&ada), None).is_err());
        drop(stream);
        let _again = holds.stream(Some(&ada), None).unwrap();
        assert!(
            holds
                .stream(Some(&person("bob", Role::Admin)), None)
                .is_ok()
        );
    }

    #[test]
    fn people_arriving_first_leave_half_the_reserve_to_probes_and_admins() {
        // A reserve of 4: two for people, two for the probes and admins.
        let holds = Holds::new(2, 1, 64);
        let peer = IpAddr::from([127, 0, 0, 1]);
        let mut kept = Vec::new();
        for name in ["p1", "p2"] {
            let ticket = Ticket::new(holds.clone(), peer, true);
            ticket
                .claim(Some(&person(name, Role::Caller)), false)
                .unwrap();
            kept.push(ticket.take().unwrap());
        }
        // Each further person, with nothing in flight, arriving one after
        // another: refused.
        for name in ["p3", "p4", "p5", "p6"] {
            let ticket = Ticket::new(holds.clone(), peer, true);
            assert!(matches!(
                ticket.claim(Some(&person(name, Role::Caller)), false),
                Err(Refused::ReserveTaken)
            ));
        }
        let probe = Ticket::new(holds.clone(), peer, true);
        assert!(probe.claim(None, true).is_ok());
        let admin = Ticket::new(holds.clone(), peer, true);
        assert!(
            admin
                .claim(Some(&person("root", Role::Admin)), false)
                .is_ok()
        );
        // One person's request ends: the next person gets its place.
        drop(kept.pop());
        let ticket = Ticket::new(holds.clone(), peer, true);
        assert!(
            ticket
                .claim(Some(&person("p3", Role::Caller)), false)
                .is_ok()
        );
    }
}
