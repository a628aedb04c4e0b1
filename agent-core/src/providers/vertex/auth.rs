//! Vertex AI authorization: an OAuth 2.0 access token, given directly or obtained from a
//! service-account key with the JWT bearer grant, cached until 60 s before it expires.
//!
//! Source: "Using OAuth 2.0 for Server to Server Applications",
//! <https://developers.google.com/identity/protocols/oauth2/service-account#httprest>
//! (the JWT's header and claims, the `urn:ietf:params:oauth:grant-type:jwt-bearer` grant
//! posted to the key's `token_uri`, the `access_token` / `expires_in` reply), and RFC 7523.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::llm::LlmError;
use crate::providers::ApiKey;

/// The OAuth scope asked for: all of Google Cloud, which Vertex AI requires (source:
/// <https://cloud.google.com/vertex-ai/docs/authentication>).
pub(crate) const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The grant type of the token exchange (RFC 7523, section 2.1).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// How long before its expiry a cached token is replaced.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// The lifetime asked for in the JWT (`exp - iat`; Google's maximum, one hour).
const ASSERTION_LIFETIME_SECS: u64 = 3600;

/// The largest token-endpoint reply read (bytes).
const TOKEN_REPLY_BYTES: usize = 64 * 1024;

/// A Google Cloud service-account key, as the JSON file the console downloads
/// (`"type": "service_account"` with `client_email`, `private_key` (PKCS#8 PEM),
/// `private_key_id` and `token_uri`); read from `GOOGLE_APPLICATION_CREDENTIALS` by
/// the `vertex/` route, or given in [`ProviderOptions::gcp_service_account`](crate::providers::ProviderOptions::gcp_service_account).
///
/// The key is parsed when the value is made, so a bad key is an error then, not at
/// the first request. `Debug` shows the account's email alone, never the key.
#[derive(Clone)]
pub struct GcpServiceAccount {
    client_email: String,
    private_key_id: Option<String>,
    token_uri: String,
    /// The PEM text, kept for equality.
    pem: ApiKey,
    key: Arc<RsaKeyPair>,
}

#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key: Option<String>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
}

impl GcpServiceAccount {
    /// The token endpoint used when the key file names none.
    pub const DEFAULT_TOKEN_URI: &'static str = "https://oauth2.googleapis.com/token";

    /// Reads a service-account key file's JSON text.
    ///
    /// # Errors
    /// A message (never holding the key) when the text is not JSON, its `type` is not
    /// `service_account` (a gcloud user credential, `authorized_user`, is not supported),
    /// `client_email` or `private_key` is missing, or the key is not an RSA PKCS#8 PEM.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let file: KeyFile = serde_json::from_str(text).map_err(|e| {
            format!(
                "the service-account key is not valid JSON (line {})",
                e.line()
            )
        })?;
        if let Some(kind) = file.kind.as_deref().filter(|k| *k != "service_account") {
            return Err(format!(
                "the credentials file is of type {kind:?}; the vertex/ route takes a \
                 service-account key (\"service_account\") or an access token \
                 (GOOGLE_OAUTH_ACCESS_TOKEN)"
            ));
        }
        let client_email = file
            .client_email
            .filter(|e| !e.trim().is_empty())
            .ok_or("the service-account key has no client_email")?;
        let pem = file
            .private_key
            .ok_or("the service-account key has no private_key")?;
        let token_uri = file
            .token_uri
            .unwrap_or_else(|| Self::DEFAULT_TOKEN_URI.to_owned());
        crate::providers::http::parse_url(&token_uri)?;
        let der = pem_body(&pem).ok_or("the service-account private_key is not a PEM block")?;
        let key = RsaKeyPair::from_pkcs8(&der)
            .map_err(|_| "the service-account private_key is not an RSA PKCS#8 key")?;
        Ok(Self {
            client_email,
            private_key_id: file.private_key_id,
            token_uri,
            pem: ApiKey::new(pem),
            key: Arc::new(key),
        })
    }

    /// The account's email (the JWT's `iss`).
    pub fn client_email(&self) -> &str {
        &self.client_email
    }

    /// The token endpoint the JWT is exchanged at.
    pub fn token_uri(&self) -> &str {
        &self.token_uri
    }

    /// The signed JWT asking for [`SCOPE`], issued at `now` (seconds since the epoch).
    fn assertion(&self, now: u64) -> Result<String, LlmError> {
        let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = &self.private_key_id {
            header["kid"] = kid.clone().into();
        }
        let claims = serde_json::json!({
            "iss": self.client_email,
            "scope": SCOPE,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME_SECS,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| LlmError::permanent("vertex: the service-account JWT cannot be signed"))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

impl PartialEq for GcpServiceAccount {
    fn eq(&self, other: &Self) -> bool {
        self.client_email == other.client_email
            && self.token_uri == other.token_uri
            && self.pem == other.pem
    }
}

impl fmt::Debug for GcpServiceAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpServiceAccount")
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .field("private_key", &"<redacted>")
            .finish()
    }
}

/// The DER bytes of the first PEM block in `pem`.
fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let start = pem.find("-----BEGIN ")?;
    let after_begin = &pem[start..];
    let body_start = after_begin.find('\n')? + 1;
    let body = &after_begin[body_start..];
    let end = body.find("-----END ")?;
    let base64: String = body[..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    STANDARD.decode(base64).ok()
}

/// Where access tokens come from.
pub(crate) enum TokenSource {
    /// A token given directly; never refreshed.
    Fixed(ApiKey),
    /// A service-account key: a token is obtained and refreshed as needed.
    ServiceAccount {
        account: GcpServiceAccount,
        client: reqwest::Client,
        cached: Mutex<Option<(ApiKey, Instant)>>,
    },
}

#[derive(Deserialize)]
struct TokenReply {
    access_token: Option<String>,
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct TokenErrorReply {
    error: Option<String>,
    error_description: Option<String>,
}

impl TokenSource {
    /// A token valid for at least [`REFRESH_MARGIN`] more: the cached one, else a new
    /// one from the token endpoint (one exchange at a time).
    ///
    /// # Errors
    /// The token endpoint's failure: transient for a connection failure, a timeout,
    /// 408, 429 and 5xx; permanent for the other statuses (a revoked key, a bad
    /// assertion) and a reply without `access_token`. No message holds a secret.
    pub(crate) async fn token(&self) -> Result<ApiKey, LlmError> {
        let (account, client, cached) = match self {
            Self::Fixed(token) => return Ok(token.clone()),
            Self::ServiceAccount {
                account,
                client,
                cached,
            } => (account, client, cached),
        };
        let mut cached = cached.lock().await;
        if let Some((token, expires)) = cached.as_ref()
            && Instant::now() + REFRESH_MARGIN < *expires
        {
            return Ok(token.clone());
        }
        let (token, lifetime) = exchange(account, client).await?;
        *cached = Some((token.clone(), Instant::now() + lifetime));
        Ok(token)
    }
}

/// One JWT-bearer exchange at the account's token endpoint: the token and its lifetime.
async fn exchange(
    account: &GcpServiceAccount,
    client: &reqwest::Client,
) -> Result<(ApiKey, Duration), LlmError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let assertion = account.assertion(now)?;
    // Both values are form-safe: the grant type's `:` is escaped by hand, the JWT is
    // base64url and dots.
    let body = format!(
        "grant_type={}&assertion={assertion}",
        GRANT_TYPE.replace(':', "%3A")
    );
    let failed = |what: &str| format!("vertex: the token endpoint {what}");
    let response = client
        .post(&account.token_uri)
        .header(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        )
        .body(body)
        .send()
        .await
        .map_err(|e| {
            let what = if e.is_timeout() {
                "timed out"
            } else {
                "could not be reached"
            };
            LlmError::transient(failed(what))
        })?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|_| LlmError::transient(failed("reply was cut")))?;
    let bytes = &bytes[..bytes.len().min(TOKEN_REPLY_BYTES)];
    if !(200..300).contains(&status) {
        let detail = serde_json::from_slice::<TokenErrorReply>(bytes)
            .ok()
            .map(|e| {
                let error = e.error.unwrap_or_default();
                match e.error_description {
                    Some(description) => format!(": {error}: {description}"),
                    None if error.is_empty() => String::new(),
                    None => format!(": {error}"),
                }
            })
            .unwrap_or_default();
        let message = failed(&format!(
            "answered {status} for {}{detail}",
            account.client_email
        ));
        let transient = matches!(status, 408 | 429) || status >= 500;
        let error = if transient {
            LlmError::transient(message)
        } else {
            LlmError::permanent(message)
        };
        return Err(error.with_status(status));
    }
    let reply: TokenReply = serde_json::from_slice(bytes)
        .map_err(|_| LlmError::permanent(failed("reply is not a token")).with_status(status))?;
    let token = reply
        .access_token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| LlmError::permanent(failed("reply has no access_token")))?;
    let lifetime = Duration::from_secs(reply.expires_in.unwrap_or(ASSERTION_LIFETIME_SECS));
    Ok((ApiKey::new(token), lifetime))
}
