//! `bare-bench`: the floor of the HTTP scenarios (see the library's docs).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    bare::main_for(false)
}
