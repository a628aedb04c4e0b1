use agent_core::agent_output;

/// A point on a chart.
#[agent_output]
pub struct Marker {
    pub position: (f64, f64),
    pub labels: Vec<(String, u32)>,
}

fn main() {}
