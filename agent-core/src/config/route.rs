//! Which client a model name gets: the built-in `test` model, decided here (it is the
//! config's, not a provider's), else the providers' routing table
//! ([`providers::route`](crate::providers)).

use std::sync::Arc;

use crate::error::ConfigError;
use crate::providers::{self, ProviderOptions, Route};
use crate::testing::TestModel;

/// The name of the built-in test model (no network, no key; see [`TestModel`]).
pub(crate) const TEST_MODEL: &str = "test";

/// Every name a config routes, for error messages: the providers' prefixes and `test`.
pub(crate) fn prefixes() -> String {
    format!("{}, {TEST_MODEL}", providers::PREFIXES)
}

/// The client of `model` with `options`.
///
/// # Errors
/// The providers' routing errors: [`ConfigError::UnknownModel`] (listing every prefix,
/// `test` included), a missing key or URL, an invalid option.
pub(crate) fn route(model: &str, options: &ProviderOptions) -> Result<Route, ConfigError> {
    if model == TEST_MODEL {
        return Ok(Route {
            client: Arc::new(TestModel::new()),
            wire_model: TEST_MODEL.to_owned(),
            pool: None,
            batch: None,
        });
    }
    providers::route(model, options).map_err(|error| match error {
        ConfigError::UnknownModel { model, .. } => ConfigError::UnknownModel {
            model,
            prefixes: prefixes(),
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_routes_to_the_built_in_model_and_unknown_names_list_it() {
        let route = route("test", &ProviderOptions::default()).unwrap();
        assert_eq!(route.client.provider(), "test");
        assert_eq!(route.wire_model, "test");
        assert!(route.pool.is_none());
        match route_error("nope-1") {
            ConfigError::UnknownModel { prefixes, .. } => assert!(prefixes.ends_with(", test")),
            other => panic!("{other:?}"),
        }
    }

    fn route_error(model: &str) -> ConfigError {
        match route(model, &ProviderOptions::default()) {
            Err(error) => error,
            Ok(_) => panic!("{model} routed"),
        }
    }
}
