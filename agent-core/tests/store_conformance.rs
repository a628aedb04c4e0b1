//! The store conformance kit run as a third-party backend runs it: the checkpoint
//! suite on agent-core's `InMemoryCheckpoints`, through `checkpoint_conformance!`
//! (agent-store runs the same functions on SQLite and PostgreSQL).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use agent_core::conformance::{Backend, Opening};
use agent_core::durable::InMemoryCheckpoints;

/// One in-memory store; every handle is a clone of it (clones share the data).
struct InMemory(InMemoryCheckpoints);

impl Backend for InMemory {
    type Store = InMemoryCheckpoints;

    fn open(&self) -> Opening<'_, InMemoryCheckpoints> {
        let store = self.0.clone();
        Box::pin(async move { store })
    }
}

async fn fresh() -> InMemory {
    InMemory(InMemoryCheckpoints::new())
}

agent_core::checkpoint_conformance!(fresh());
