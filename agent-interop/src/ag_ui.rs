//! AG-UI (todo)
