//! The `vertex/` route's settings from the options and the environment.

use crate::providers::{ApiKey, ProviderOptions};

use super::auth::GcpServiceAccount;

/// Why the settings could not be resolved (the router makes it a `ConfigError`).
pub(crate) enum Unresolved {
    /// A required variable is not set (its name).
    Missing(&'static str),
    /// A value is unusable (what is wrong, without a secret).
    Invalid(String),
}

/// Fills `resolved` with Vertex AI's settings: the project (the options', else
/// `GOOGLE_CLOUD_PROJECT`), the location (else `GOOGLE_CLOUD_LOCATION`), and an access
/// token (the options' bearer token, else `GOOGLE_OAUTH_ACCESS_TOKEN`) or else a
/// service-account key (the options', else the JSON file `GOOGLE_APPLICATION_CREDENTIALS`
/// names, read and parsed here so that a missing or bad key fails at build). Source:
/// "How Application Default Credentials works",
/// <https://cloud.google.com/docs/authentication/application-default-credentials>.
///
/// # Errors
/// [`Unresolved::Missing`] naming the first variable missing; [`Unresolved::Invalid`]
/// for a key file that cannot be read or is not a service-account key.
pub(crate) fn resolve(
    options: &ProviderOptions,
    resolved: &mut ProviderOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Unresolved> {
    let required = |explicit: &Option<String>, var: &'static str| {
        explicit
            .clone()
            .or_else(|| env(var))
            .ok_or(Unresolved::Missing(var))
    };
    resolved.gcp_project = Some(required(&options.gcp_project, "GOOGLE_CLOUD_PROJECT")?);
    resolved.gcp_location = Some(required(&options.gcp_location, "GOOGLE_CLOUD_LOCATION")?);
    if resolved.bearer_token.is_some() || resolved.gcp_service_account.is_some() {
        return Ok(());
    }
    if let Some(token) = env("GOOGLE_OAUTH_ACCESS_TOKEN") {
        resolved.bearer_token = Some(ApiKey::new(token));
        return Ok(());
    }
    let path = env("GOOGLE_APPLICATION_CREDENTIALS")
        .ok_or(Unresolved::Missing("GOOGLE_APPLICATION_CREDENTIALS"))?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Unresolved::Invalid(format!(
            "GOOGLE_APPLICATION_CREDENTIALS names {path:?}, which cannot be read: {e}"
        ))
    })?;
    let account = GcpServiceAccount::from_json(&text).map_err(|e| {
        Unresolved::Invalid(format!("GOOGLE_APPLICATION_CREDENTIALS ({path:?}): {e}"))
    })?;
    resolved.gcp_service_account = Some(account);
    Ok(())
}
