//! `bare-stream-bench`: the floor of the streamed HTTP scenario (see the library's docs).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    bare::main_for(true)
}
