// A #[tool] fn may return a ToolContent (text and parts), plain or in a Result.
use agent_core::content::Part;
use agent_core::tool::ToolContent;
use agent_core::{ToolError, tool, tools};

/// Renders the invoice.
#[tool]
async fn render_invoice(order_id: String) -> Result<ToolContent, ToolError> {
    let pdf = Part::from_bytes_as(b"%PDF-1.4\n".to_vec(), "application/pdf")
        .map_err(|e| ToolError::new(e.to_string()))?;
    Ok(ToolContent::text(format!("invoice of {order_id}")).part(pdf))
}

/// Takes a screenshot.
#[tool]
async fn screenshot() -> agent_core::tool::ToolContent {
    ToolContent::text("the screen")
}

fn main() {
    let registry = tools![render_invoice, screenshot];
    assert_eq!(registry.names().count(), 2);
}
