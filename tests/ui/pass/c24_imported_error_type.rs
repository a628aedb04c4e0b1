// C24: a tool whose error type is imported with `use`, not written as a full path.
mod errors {
    use std::fmt;

    #[derive(Debug)]
    pub struct LookupError(pub String);

    impl fmt::Display for LookupError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "no order {}", self.0)
        }
    }
}

mod orders {
    use agent_core::tool;

    use crate::errors::LookupError;

    /// Looks up an order by its id.
    #[tool]
    pub async fn lookup_order(order_id: String) -> Result<String, LookupError> {
        Err(LookupError(order_id))
    }
}

fn main() {
    let registry = agent_core::tools![orders::lookup_order];
    assert_eq!(registry.len(), 1);
}
