//! The provider's own tool search, as a request asks for it ([`NativeToolSearch`]) and
//! as a reply reports it ([`ProviderSearches`]). The runner sets it for a config with
//! `ToolSearch::prefer_native` on a route whose client says it can
//! ([`LlmClient::native_tool_search`](super::LlmClient::native_tool_search)).

use std::collections::HashSet;

/// The provider's tool search asked of one request ([`LlmRequest::native_tool_search`](super::LlmRequest::native_tool_search)).
///
/// The request's tools are all of the config's (not only the revealed ones); the
/// adapter adds the provider's search tool and marks each [`searchable`](Self::searchable)
/// tool `defer_loading: true`, except a tool the run revealed whose reference the
/// adapter does not send back (revealed by the local search, or by a provider whose
/// blocks were dropped at a switch to another model): that one goes loaded, so the
/// model can call it without searching again. The always-on tools and the runner's own
/// (`submit_output`, `escalate_to_human`, transfers) are never deferred.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NativeToolSearch {
    /// The tools the search can find (names): the config's tools but the always-on.
    pub searchable: HashSet<String>,
    /// The tools the run's searches revealed so far, local or the provider's (names).
    pub revealed: HashSet<String>,
}

impl NativeToolSearch {
    /// A search over `searchable` for a run that revealed `revealed` so far.
    pub fn new(
        searchable: impl IntoIterator<Item = String>,
        revealed: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            searchable: searchable.into_iter().collect(),
            revealed: revealed.into_iter().collect(),
        }
    }

    /// Whether the tool `name` goes `defer_loading: true`, when the provider's blocks
    /// the request sends back reference the tools `referenced` (names): a searchable
    /// tool not revealed yet, or revealed and referenced (the provider loads it from
    /// its reference).
    pub fn defers(&self, name: &str, referenced: &HashSet<&str>) -> bool {
        self.searchable.contains(name)
            && (!self.revealed.contains(name) || referenced.contains(name))
    }
}

/// What the provider's own tool search did in one model turn
/// ([`LlmResponse::provider_searches`](super::LlmResponse::provider_searches), set only
/// when the turn had a search): the runner counts each search as a tool call and adds
/// the revealed names to the run's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderSearches {
    /// The searches the provider ran in the turn (Anthropic `server_tool_use` blocks
    /// of a `tool_search_tool_*`; OpenAI `tool_search_call` items).
    pub searches: u32,
    /// The tools they returned (names, in the order returned, repeats kept): Anthropic
    /// `tool_reference.tool_name`s, the names of OpenAI `tool_search_output.tools`.
    pub revealed: Vec<String>,
}

impl ProviderSearches {
    /// Whether the turn had no provider search.
    pub fn is_empty(&self) -> bool {
        self.searches == 0 && self.revealed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_deferred_until_revealed_and_after_only_while_referenced() {
        let search = NativeToolSearch::new(
            ["refund_order".to_owned(), "cancel_order".to_owned()],
            ["refund_order".to_owned()],
        );
        let none = HashSet::new();
        let refund: HashSet<&str> = ["refund_order"].into_iter().collect();
        assert!(search.defers("cancel_order", &none));
        assert!(!search.defers("refund_order", &none));
        assert!(search.defers("refund_order", &refund));
        // Not searchable (always-on, the runner's own): never deferred.
        assert!(!search.defers("lookup_order", &refund));
        assert!(!search.defers("submit_output", &none));
        assert!(ProviderSearches::default().is_empty());
    }
}
