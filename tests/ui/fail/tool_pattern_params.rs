use agent_core::tool;

pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// Measures the distance from the origin.
#[tool]
async fn distance(Point { x, y }: Point, _: u32, ref label: String) -> f64 {
    let _ = label;
    (x * x + y * y).sqrt()
}

fn main() {}
