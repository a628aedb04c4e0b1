//! JSON-RPC 2.0 envelopes and the error codes of A2A 1.0's JSON-RPC binding
//! (JSON-RPC 2.0 specification, section 5.1; A2A 1.0, "Error Handling").

use serde::Serialize;
use serde_json::{Value, json};

/// A JSON-RPC error code and the A2A errors this crate uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RpcCode {
    /// -32700: the body is not JSON.
    ParseError,
    /// -32600: not a JSON-RPC request (or larger than the server takes).
    InvalidRequest,
    /// -32601: no such method.
    MethodNotFound,
    /// -32602: the params do not fit the method.
    InvalidParams,
    /// -32603: the server failed (a store error).
    InternalError,
    /// -32001: no task has this id.
    TaskNotFound,
    /// -32002: the task is in a terminal state.
    TaskNotCancelable,
    /// -32004: a request this server does not serve (a message for a finished task).
    UnsupportedOperation,
    /// -32009: an `A2A-Version` this server does not speak.
    VersionNotSupported,
}

impl RpcCode {
    /// The number.
    pub fn code(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            RpcCode::InternalError => -32603,
            RpcCode::TaskNotFound => -32001,
            RpcCode::TaskNotCancelable => -32002,
            RpcCode::UnsupportedOperation => -32004,
            RpcCode::VersionNotSupported => -32009,
        }
    }
}

/// A JSON-RPC error: a code and a message (never a secret: messages name ids, states
/// and categories).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcError {
    /// The code.
    pub code: RpcCode,
    /// The message.
    pub message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: RpcCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The response to request `id` with this result.
pub(crate) fn result(id: &Value, result: impl Serialize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The error response to request `id` (`null` when the request had none or could not
/// be read).
pub(crate) fn error(id: &Value, error: &RpcError) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": error.code.code(), "message": error.message},
    })
}

/// A request read from a body: its id, method and params.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Value,
}

/// Reads a JSON-RPC 2.0 request; the error carries the id when one was readable.
pub(crate) fn parse(body: &[u8]) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(RpcCode::ParseError, format!("the body is not JSON: {e}")),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err((
            Value::Null,
            RpcError::new(
                RpcCode::InvalidRequest,
                "a request is a JSON object (batches are not served)",
            ),
        ));
    };
    let id = match object.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(Value::Null) | None => {
            return Err((
                Value::Null,
                RpcError::new(
                    RpcCode::InvalidRequest,
                    "the request has no id (notifications are not served)",
                ),
            ));
        }
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::new(RpcCode::InvalidRequest, "the id is a string or a number"),
            ));
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            id,
            RpcError::new(RpcCode::InvalidRequest, "\"jsonrpc\" must be \"2.0\""),
        ));
    }
    let Some(Value::String(method)) = object.remove("method") else {
        return Err((
            id,
            RpcError::new(RpcCode::InvalidRequest, "\"method\" must be a string"),
        ));
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    Ok(Request { id, method, params })
}
