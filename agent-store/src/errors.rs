//! Database errors as [`StoreError`]s: which mean the database cannot be reached or
//! cannot take it now (`Unavailable`), which are the backend's (`Backend`), and no URL
//! password in any message.

use agent_core::store::StoreError;

/// Whether `error` says the schema being created already exists (see `Shared::migrate`).
pub(crate) fn is_duplicate_schema(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "23505" || code == "42P06")
}

/// A database error as a [`StoreError`]: connection trouble, timeouts and locks are
/// `Unavailable`, the rest `Backend`. Messages carry no URL or password.
pub(crate) fn db_error(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => StoreError::unavailable(redact(&error)),
        sqlx::Error::Database(db) => {
            let message = db.message().to_owned();
            let sqlite = db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some();
            let code = db.code();
            let locked = message.contains("database is locked") || message.contains("busy");
            if locked || code.is_some_and(|c| is_unavailable_code(&c, sqlite)) {
                StoreError::unavailable(message)
            } else {
                StoreError::backend(message)
            }
        }
        _ => StoreError::backend(redact(&error)),
    }
}

/// Database error codes that mean "cannot be reached or cannot take it now":
/// SQLite's primary codes `SQLITE_BUSY` (5), `SQLITE_LOCKED` (6) and `SQLITE_CANTOPEN`
/// (14) (sqlx gives extended codes: the primary code is the low byte); PostgreSQL's
/// class 08 (connection exceptions), 57P01-57P03 (the server shuts down, crashed or is
/// starting) and 53300 (too many connections).
fn is_unavailable_code(code: &str, sqlite: bool) -> bool {
    if sqlite {
        return code
            .parse::<u32>()
            .is_ok_and(|n| matches!(n & 0xff, 5 | 6 | 14));
    }
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
}

/// A migration's error: a failed statement as [`db_error`], the rest `Backend`.
pub(crate) fn migrate_error(error: sqlx::migrate::MigrateError) -> StoreError {
    match error {
        sqlx::migrate::MigrateError::Execute(e) => db_error(e),
        other => StoreError::backend(format!("migrations: {other}")),
    }
}

/// An error's text with anything that looks like a URL's password removed.
pub(crate) fn redact(error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    // `scheme://user:password@host`: drop the password.
    match (text.find("://"), text.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &text[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:<redacted>{}",
                    &text[..scheme + 3],
                    &userinfo[..colon],
                    &text[at..]
                ),
                None => text,
            }
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact(&"bad postgres://u:secret@h:5432/db"),
            "bad postgres://u:<redacted>@h:5432/db"
        );
        assert_eq!(redact(&"no url"), "no url");
    }

    #[test]
    fn codes_that_may_pass_are_unavailable() {
        // SQLite: BUSY, LOCKED, CANTOPEN and their extended codes.
        for code in ["5", "6", "14", "262", "1038"] {
            assert!(is_unavailable_code(code, true), "{code}");
        }
        // SQLite: FULL, READONLY, NOTADB, CONSTRAINT_UNIQUE.
        for code in ["13", "8", "26", "2067"] {
            assert!(!is_unavailable_code(code, true), "{code}");
        }
        for code in ["08006", "57P01", "57P03", "53300"] {
            assert!(is_unavailable_code(code, false), "{code}");
        }
        for code in ["23505", "42P01", "53100"] {
            assert!(!is_unavailable_code(code, false), "{code}");
        }
    }
}
