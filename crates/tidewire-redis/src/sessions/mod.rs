//! [`SessionRouting`]: session-era Streamable HTTP behind a load balancer without affinity.
//!
//! A session lives in the process that opened it (its owner). Redis knows which process that
//! is, and for whom it was opened (`session:<id>`, a hash: `owner`, and `subject` when an
//! authorization layer verified the request that opened it; kept as long as the session is
//! used). A request naming a session
//! that another live replica owns is forwarded to it through Redis — the request whole, the
//! answer (status, headers, and each chunk of its body, an SSE stream included) back — so the
//! client sees one server whichever replica the balancer picked, and a stream it resumes with
//! `Last-Event-ID` through any replica is replayed by the owner's event store. When the owner
//! is dead, a resumption is replayed from the copy a [`RedisEventStore`](crate::RedisEventStore)
//! keeps in Redis (to the session's subject only), and every other request for the session is
//! answered 404.
//!
//! With an authorization layer in front of the router this wraps (a `BearerLayer`), the replica
//! a request lands on verifies its token; the [`Principal`] it found travels with the forwarded
//! request, so the owner holds the session to its subject and its handlers see it
//! (`ctx.auth()`), as if the request had landed there.
//!
//! The parts: [`routing`] (the handle, and the tasks it starts), [`route`] (the middleware
//! choosing where a request is served), [`forward`] (a request's trip to its owner and its
//! answer's back), [`places`] (which sessions this replica holds, as Redis is told),
//! [`settling`] (telling a missing place from a place Redis lost, after a restart) and
//! [`shared`] (what they all use).

mod forward;
mod pieces;
mod places;
mod route;
mod routing;
mod settling;
mod shared;

#[doc(hidden)]
pub use forward::fuzz_forwarded;
pub use routing::{RoutingLimits, SessionRouting};
