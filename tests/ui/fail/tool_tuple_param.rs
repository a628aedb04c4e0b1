use agent_core::tool;

/// Measures the distance from the origin.
#[tool]
async fn distance(point: (f64, f64)) -> f64 {
    (point.0 * point.0 + point.1 * point.1).sqrt()
}

fn main() {}
